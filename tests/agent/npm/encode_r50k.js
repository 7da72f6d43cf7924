// SPDX-License-Identifier: MIT
// Independent GPT-2 reference for ClusterPPL's tokenizer tests and bench: the npm package
// gpt-tokenizer (its r50k_base encoding = GPT-2's vocabulary, merges and regex).
//   node encode_r50k.js NPM_PREFIX TEXT_FILE OUT.u32
// NPM_PREFIX holds node_modules/gpt-tokenizer: tests/agent/npm, where scripts/install-deps.sh runs npm ci.
// Writes little-endian uint32 ids and prints one line: "ids N seconds S MB/s X version V".
'use strict';
const fs = require('fs');
const path = require('path');

const [prefix, textFile, outFile] = process.argv.slice(2);
if (!prefix || !textFile || !outFile) {
  console.error('usage: node encode_r50k.js NPM_PREFIX TEXT_FILE OUT.u32');
  process.exit(2);
}
const modules = path.join(path.resolve(prefix), 'node_modules');
const encoding = require(require.resolve('gpt-tokenizer/encoding/r50k_base', { paths: [modules] }));
const version = require(path.join(modules, 'gpt-tokenizer', 'package.json')).version;

const bytes = fs.readFileSync(textFile);
const text = bytes.toString('utf8');
const start = process.hrtime.bigint();
// allowedSpecial 'all': "<|endoftext|>" in the text is the special token, as in Hugging Face.
const ids = encoding.encode(text, { allowedSpecial: 'all' });
const seconds = Number(process.hrtime.bigint() - start) / 1e9;

const out = Buffer.alloc(ids.length * 4);
for (let i = 0; i < ids.length; ++i) out.writeUInt32LE(ids[i], 4 * i);
fs.writeFileSync(outFile, out);
console.log(`ids ${ids.length} seconds ${seconds.toFixed(4)} MB/s ${(bytes.length / 1e6 / seconds).toFixed(2)} version ${version}`);
