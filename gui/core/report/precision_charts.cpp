// SPDX-License-Identifier: MIT
#include "report/precision_charts.h"

#include "charts/stacked_bar_chart.h"

#include <limits>

using namespace Qt::StringLiterals;

namespace cppl::core::report {

using charts::ValueFormat;

namespace {

/// One bar per precision (NaN: not known, no bar), labelled with the precision.
std::unique_ptr<charts::StackedBarChart> bars(const std::vector<history::PrecisionRow> &rows, const charts::Theme &theme,
                                              const QString &title, const QString &segment, charts::AxisSpec y,
                                              double (*value)(const history::PrecisionRow &))
{
    auto c = std::make_unique<charts::StackedBarChart>();
    c->setTheme(theme);
    c->setTitle(title);
    c->setSegmentNames({segment});
    std::vector<double> values;
    QStringList labels;
    for (const auto &r : rows) {
        values.push_back(value(r));
        labels << r.precision;
    }
    c->setValues(std::move(values));
    c->setCategoryLabels(labels);
    c->setXAxis({u"precision"_s, ValueFormat::Plain, {}, {}, false});
    c->setYAxis(std::move(y));
    c->setEmptyText(u"none of these runs was compared with a reference model"_s);
    return c;
}

} // namespace

std::vector<ReportChart> precisionCharts(const std::vector<history::PrecisionRow> &rows, const charts::Theme &theme)
{
    std::vector<ReportChart> out;
    if (!history::comparesPrecisions(rows))
        return out;
    constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();
    out.push_back({u"precision-speed"_s, u"Scored tokens per second of each precision's run (all its ranks)."_s,
                   bars(rows, theme, u"Speed per precision"_s, u"tokens/s"_s, {u"tokens/s"_s, ValueFormat::Si, {}, {}, true},
                        [](const history::PrecisionRow &r) { return r.tokensPerSecond > 0 ? r.tokensPerSecond : kUnknown; })});
    out.push_back({u"precision-quality"_s,
                   u"Mean KL divergence KL(P_ref || P_model) of each precision's run to its reference model, over every scored "
                   "token; lower is closer (no bar: the run had no reference model)."_s,
                   bars(rows, theme, u"KL divergence to the reference per precision"_s, u"KLD mean"_s,
                        {u"KLD (nats)"_s, ValueFormat::Plain, {}, {}, true},
                        [](const history::PrecisionRow &r) { return r.quality ? r.quality->kldMean : kUnknown; })});
    out.push_back({u"precision-memory"_s, u"The weights one rank holds, as the model stores them (quantized layers packed)."_s,
                   bars(rows, theme, u"Weights per rank per precision"_s, u"weights"_s, {u"bytes"_s, ValueFormat::Si, {}, {}, true},
                        [](const history::PrecisionRow &r) { return r.weightBytes > 0 ? double(r.weightBytes) : kUnknown; })});
    return out;
}

} // namespace cppl::core::report
