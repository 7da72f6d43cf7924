// SPDX-License-Identifier: MIT
// The agent's own float32 kernels on the CPU (no LibTorch, no BLAS): matrix products on packed
// weights with a register-blocked micro-kernel chosen by cpuid (AVX-512, AVX2+FMA, or portable C++)
// in cpu_gemm.cpp, causal attention built on it (cpu_attention.cpp) and the row-wise steps
// (cpu_rows.cpp). The vocabulary's log-softmax steps are in cpu_log_softmax.h.
//
// Why not the BLAS: OpenBLAS falls back to generic kernels on CPUs it does not recognise (4x slower
// here), and both OpenBLAS and oneDNN may split a product's K dimension over threads, so a window's
// bits would depend on the thread count. Here every output element is one FMA chain over k = 0..K-1
// in blocks of a fixed size, whatever the threads: work is split over rows and column panels only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace cppl::agent::cpu {

enum class Isa { Generic, Avx2, Avx512 };

/// The widest kernel this CPU runs (cpuid via the compiler's builtins; checked once).
[[nodiscard]] Isa detectIsa();
[[nodiscard]] const char *isaName(Isa isa);

/// Column panel width of packed B operands.
inline constexpr std::int64_t kPanel = 32;

/// A B operand packed in column panels: panel p holds columns [p * kPanel, p * kPanel + kPanel) as
/// one row of kPanel floats per k (zero past n). A panel's first k' rows are the operand for any
/// k' <= k (attention uses key prefixes of one packing).
struct PanelView
{
    const float *data = nullptr;
    std::int64_t n = 0;           ///< columns of C
    std::int64_t k = 0;           ///< inner dimension used
    std::int64_t panelStride = 0; ///< floats from one panel to the next (>= k * kPanel)
};

[[nodiscard]] inline std::int64_t panelCount(std::int64_t n) { return (n + kPanel - 1) / kPanel; }

/// Packs W[n][k] (row stride ldw; a Linear weight, so C = A W^T) into `out` (panelCount(n) * k * kPanel floats).
void packTransposed(const float *w, std::int64_t ldw, std::int64_t n, std::int64_t k, float *out);
/// Packs B[k][n] (row stride ldb; C = A B) into `out` with panels `panelStride` floats apart.
void packPlain(const float *b, std::int64_t ldb, std::int64_t k, std::int64_t n, float *out, std::int64_t panelStride);

/// Frees what allocateFloats returned.
struct FreeFloats
{
    void operator()(float *p) const;
};
using FloatBuffer = std::unique_ptr<float[], FreeFloats>;
/// `floats` floats (at least one), zeroed, 64-byte aligned; from 2 MiB on aligned to 2 MiB and advised
/// for transparent huge pages: one page fault per 2 MiB instead of per 4 KiB when first touched, and
/// fewer TLB misses while the GEMM streams through packed weights and activations.
[[nodiscard]] FloatBuffer allocateFloats(std::int64_t floats);

/// Runs f(begin, end) over [0, n) split across the intra-op threads (LibTorch's pool in the agent).
using ParallelFor = std::function<void(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)> &f)>;

/// A weight packed once at load. Memory is 64-byte aligned.
class PackedMatrix
{
public:
    PackedMatrix() = default;
    /// W[n][k] (Linear layout) -> packed; several weights with the same k stack along n (fused q/k/v).
    PackedMatrix(std::int64_t n, std::int64_t k);
    void packRows(std::int64_t row0, const float *w, std::int64_t ldw, std::int64_t rows);
    /// Row `row` of W (k floats) back out of the panels, the same values packRows was given.
    void unpackRow(std::int64_t row, float *out) const;
    [[nodiscard]] PanelView view() const { return {m_data.get(), m_n, m_k, m_k * kPanel}; }
    [[nodiscard]] std::int64_t n() const { return m_n; }
    [[nodiscard]] std::int64_t k() const { return m_k; }

private:
    FloatBuffer m_data;
    std::int64_t m_n = 0, m_k = 0;
};

/// C[m][n] = (accumulate ? C : 0) + bias + A[m][k] * B, split over row blocks (and column panels when
/// rows are few) with `parallel`.
void gemm(const float *a, std::int64_t lda, std::int64_t m, const PanelView &b, float *c, std::int64_t ldc, const float *bias, bool accumulate,
          const ParallelFor &parallel);

/// An A operand already in the kernel's order: the 8 values of rows 8t..8t+7 at step k are at
/// data + t * tileStride + k * kStride. Packed A has kStride 8; attention's transposed scores, whose
/// columns are queries, are one with kStride = their row stride and tileStride 8. Rows past m of the
/// last tile are read (finite values, results dropped).
struct APacked
{
    const float *data = nullptr;
    std::int64_t kStride = 8;
    std::int64_t tileStride = 0;
};
[[nodiscard]] inline std::int64_t tileCount(std::int64_t m) { return (m + 7) / 8; }
/// Packs rows of A[m][k] (row stride lda) into `out` as tileCount(m) tiles of k x 8 (kStride 8, tileStride
/// k * 8), zero past m.
void packTiles(const float *a, std::int64_t lda, std::int64_t m, std::int64_t k, float *out);
/// C[m][n] = A B on this thread, A given as tiles (no bias, no accumulation).
void gemmPackedSerial(const APacked &a, std::int64_t m, const PanelView &b, float *c, std::int64_t ldc);

/// Causal softmax attention on row-major activations: row (b * T + t) of q holds the heads side by
/// side (head h at column h * hd, stride ldq); k and v likewise with kvHeads heads (grouped-query:
/// query head h reads KV head h / (heads / kvHeads)). Writes out[b * T + t][h * hd ...] (stride ldo).
/// Scores are scaled by `scale`, exponentiated in float32 over keys 0..t only (less their max),
/// multiplied by V, and each output row divided by its sum of exponentials. A sliding window W > 0:
/// keys max(0, t - W + 1)..t only (W keys, the query's own included, as transformers' mask), and
/// only the key tiles holding them are multiplied.
struct AttentionShape
{
    std::int64_t batch = 0, T = 0, heads = 0, kvHeads = 0, hd = 0;
    std::int64_t ldq = 0, ldk = 0, ldv = 0, ldo = 0;
    float scale = 1;
    std::int64_t window = 0; ///< 0: none
    float softcap = 0;       ///< > 0: scores scaled, then cap tanh(s / cap) before the softmax (Gemma 2); 0: none
};
void causalAttention(const float *q, const float *k, const float *v, float *out, const AttentionShape &s, const ParallelFor &parallel);

/// out[r] = weight * x[r] / sqrt(mean(x[r]^2) + eps) for rows of width n (sum of squares in double).
void rmsNorm(const float *x, std::int64_t rows, std::int64_t n, const float *weight, double eps, float *out, const ParallelFor &parallel);
/// rmsNorm in place on `heads` pieces of width n at the start of each row (stride ld): qwen3's per-head
/// q/k norms on the q/k columns of the q/k/v product, one weight for every head.
void rmsNormHeads(float *x, std::int64_t rows, std::int64_t ld, std::int64_t heads, std::int64_t n, const float *weight, double eps,
                  const ParallelFor &parallel);
/// out[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias for rows of width n: mean and (biased) variance
/// in double, two passes, each row by one thread (GPT-2's LayerNorm). x may equal out.
void layerNorm(const float *x, std::int64_t rows, std::int64_t n, const float *weight, const float *bias, double eps, float *out,
               const ParallelFor &parallel);
/// x = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) in place on rows of width n (GPT-2's gelu_new).
void geluTanh(float *x, std::int64_t rows, std::int64_t n, const ParallelFor &parallel);
/// Rotary embedding in place on `heads` heads of width hd at the start of each row (stride ld); row r
/// is position r % T; cos and sin are [T][hd] (transformers' rotate_half convention).
void rotary(float *x, std::int64_t rows, std::int64_t ld, std::int64_t heads, std::int64_t hd, std::int64_t T, const float *cos, const float *sin,
            const ParallelFor &parallel);
/// The same on the first `rot` features of each head (phi3's partial_rotary_factor); cos and sin [T][rot].
void rotaryPartial(float *x, std::int64_t rows, std::int64_t ld, std::int64_t heads, std::int64_t hd, std::int64_t rot, std::int64_t T, const float *cos,
                   const float *sin, const ParallelFor &parallel);
/// gu[r][j] = silu(gu[r][j]) * gu[r][n + j] for j < n, in place (the gate half of a fused gate/up row).
void siluMul(float *gu, std::int64_t rows, std::int64_t n, const ParallelFor &parallel);
/// The same with the tanh GELU (Gemma's GeGLU, gelu_pytorch_tanh).
void geluTanhMul(float *gu, std::int64_t rows, std::int64_t n, const ParallelFor &parallel);
/// Soft-capping on this thread: x = cap tanh(x inScale / cap) for n floats (Gemma 2's attention scores, scaled first).
void softcap(float *x, std::int64_t n, float inScale, float cap);
/// x = cap tanh(x / cap) on rows of width n (Gemma 2's final logits).
void softcapRows(float *x, std::int64_t rows, std::int64_t n, float cap, const ParallelFor &parallel);
/// x[r] += y[r] for rows of width n (a residual add of a normed output).
void addRows(float *x, const float *y, std::int64_t rows, std::int64_t n, const ParallelFor &parallel);

} // namespace cppl::agent::cpu
