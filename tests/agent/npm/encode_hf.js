// SPDX-License-Identifier: MIT
// Hugging Face's own tokenizer (the Rust `tokenizers` crate, through its npm binding) as the
// reference for ClusterPPL's tokenizer tests.
//   node encode_hf.js NPM_PREFIX JOBS.json OUT.json
// JOBS.json: [{"tokenizer": "path/tokenizer.json", "text_file": "path"}, ...]; OUT.json gets
// [[ids...], ...] in the same order. Truncation and padding are switched off (as ClusterPPL
// ignores them); no special tokens are added unless a job says "add_special_tokens": true (then
// the post-processor's, e.g. Gemma's <bos>). Each tokenizer file is loaded once per run.
'use strict';
const fs = require('fs');
const path = require('path');

const [prefix, jobsFile, outFile] = process.argv.slice(2);
if (!prefix || !jobsFile || !outFile) {
  console.error('usage: node encode_hf.js NPM_PREFIX JOBS.json OUT.json');
  process.exit(2);
}
const modules = path.join(path.resolve(prefix), 'node_modules');
const { Tokenizer } = require(require.resolve('tokenizers', { paths: [modules] }));

(async () => {
  const jobs = JSON.parse(fs.readFileSync(jobsFile, 'utf8'));
  const results = [];
  const loaded = new Map();
  for (const job of jobs) {
    if (!loaded.has(job.tokenizer)) {
      const t = Tokenizer.fromFile(job.tokenizer);
      t.disableTruncation();
      t.disablePadding();
      loaded.set(job.tokenizer, t);
    }
    const tokenizer = loaded.get(job.tokenizer);
    const text = fs.readFileSync(job.text_file, 'utf8');
    const encoding = await tokenizer.encode(text, null, { addSpecialTokens: job.add_special_tokens === true });
    results.push(Array.from(encoding.getIds()));
  }
  fs.writeFileSync(outFile, JSON.stringify(results));
})().catch((e) => {
  console.error(String(e && e.stack ? e.stack : e));
  process.exit(1);
});
