/**
 * The streaming drivers on real bytes: encodings, line handling, the report a
 * user sees, and resuming from a saved position with the same verdict.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { chat, jsonl } from '../helpers/datasets';
import { after, describe, test } from 'node:test';
import { validateCsv } from '../../datasets/csv';
import { validateJsonl } from '../../datasets/jsonl';
import { validateParquet } from '../../datasets/parquet';
import type { ValidationProgress } from '../../datasets/progress';
import { buildReport } from '../../datasets/report';

/** Feeds the bytes in small chunks, so lines straddle chunk boundaries. */
const bytes = (b: Buffer | string, chunk = 7) => {
  const buf = Buffer.isBuffer(b) ? b : Buffer.from(b, 'utf8');
  const parts: Buffer[] = [];
  for (let i = 0; i < buf.length; i += chunk) parts.push(buf.subarray(i, i + chunk));
  return Readable.from(parts);
};

async function report(content: Buffer | string, purpose: 'fine-tune' | 'eval' = 'fine-tune') {
  return buildReport('file-x', 'jsonl', await validateJsonl(bytes(content), purpose));
}

describe('JSONL driver', () => {
  test('a valid conversational file gives the full report', async () => {
    const r = await report(jsonl(chat('hi', 'hello'), chat('2+2?', '4')));
    assert.deepEqual(r, {
      valid: true,
      file_id: 'file-x',
      nlines: 2,
      dataset_format: 'CONVERSATION',
      dataset_has_sample_weights: false,
      dataset_has_message_weights: false,
      dataset_is_multimodal: false,
      dataset_has_tools: false,
      dataset_has_parallel_tool_calls: false,
      dataset_has_reasoning: false,
    });
  });

  test('a last line without a newline, CRLF endings and a BOM are accepted', async () => {
    const content = '\uFEFF' + [JSON.stringify({ text: 'a' }), JSON.stringify({ text: 'b' })].join('\r\n');
    const r = await report(content);
    assert.equal(r.valid, true, r.error);
    assert.equal(r.nlines, 2);
    assert.equal(r.dataset_format, 'GENERAL');
  });

  const bad: Array<[string, Buffer | string, RegExp]> = [
    ['empty file', '', /^Line 1: the file holds no records/],
    [
      'blank line in the middle',
      `${JSON.stringify({ text: 'a' })}\n\n${JSON.stringify({ text: 'b' })}\n`,
      /^Line 2: the line is blank/,
    ],
    ['only whitespace', ' \n', /^Line 1: the line is blank/],
    [
      'invalid UTF-8',
      Buffer.concat([
        Buffer.from(jsonl({ text: 'ok' })),
        Buffer.from('{"text": "caf'),
        Buffer.from([0xe9]),
        Buffer.from('"}\n'),
      ]),
      /^Line 2: the line is not valid UTF-8/,
    ],
    ['not JSON', `${JSON.stringify({ text: 'a' })}\n{text: 'b'}\n`, /^Line 2: the line is not valid JSON/],
    [
      'truncated last line',
      `${JSON.stringify({ text: 'a' })}\n{"text": "b`,
      /^Line 2: the last line is not complete JSON .* truncated/,
    ],
    ['JSON that is not an object', `[1, 2]\n`, /^Line 1: .*array/],
    ['a number', `42\n`, /^Line 1: .*number/],
    ['mixed formats', jsonl({ text: 'a' }, chat('q', 'a')), /^Line 2: .*CONVERSATION.*GENERAL/],
  ];
  for (const [name, content, expected] of bad) {
    test(`${name}: a definite answer naming the line`, async () => {
      const r = await report(content);
      assert.equal(r.valid, false);
      assert.equal(r.error_type, 'INVALID_FORMAT');
      assert.match(r.error ?? '', expected);
    });
  }

  test('counts only the records before the error', async () => {
    const r = await report(jsonl({ text: 'a' }, { text: 'b' }, { txt: 'c' }));
    assert.equal(r.nlines, 2);
    assert.match(r.error!, /^Line 3: /);
  });

  test('eval files accept any object per line', async () => {
    const r = await report(jsonl({ question: 'q', answer: 'a' }, { anything: [1, 2] }), 'eval');
    assert.equal(r.valid, true);
    assert.equal(r.nlines, 2);
    assert.equal(r.dataset_format, undefined);
  });

  test('resuming from a saved position gives the same verdict as one pass', async () => {
    const records = Array.from({ length: 500 }, (_, i) => chat(`q${i}`, `a${i}`.repeat(50)));
    records.push({ messages: [{ role: 'user', content: 'no answer' }] } as never);
    const content = Buffer.from(jsonl(...records));
    const whole = await validateJsonl(bytes(content, 4096), 'fine-tune');

    // Where a worker lost after 200 lines would have left its heartbeat.
    const saved = await positionAfterLines(content, 200);
    assert.equal(saved.line, 200);
    assert.ok(saved.line > 0 && saved.offset > 0);

    const resumed = await validateJsonl(bytes(content.subarray(saved.offset), 4096), 'fine-tune', { resume: saved });
    assert.deepEqual(buildReport('f', 'jsonl', resumed), buildReport('f', 'jsonl', whole));
    assert.match(buildReport('f', 'jsonl', resumed).error!, /^Line 501: /);
  });
});

/** The progress a run would have after `lines` lines: validate exactly that prefix. */
async function positionAfterLines(content: Buffer, lines: number): Promise<ValidationProgress> {
  let end = 0;
  for (let i = 0; i < lines; i++) end = content.indexOf(0x0a, end) + 1;
  const outcome = await validateJsonl(bytes(content.subarray(0, end)), 'fine-tune');
  assert.equal(outcome.ok, true);
  return outcome.progress;
}

describe('CSV driver (eval files)', () => {
  const csv = async (s: string, resume?: ValidationProgress) =>
    buildReport('f', 'csv', await validateCsv(bytes(s), { resume }));

  test('a header and rows, with quoted fields spanning lines', async () => {
    const r = await csv('\uFEFFquestion,answer\n"what is\na cat?",animal\nwhere,here\n');
    assert.equal(r.valid, true, r.error);
    assert.equal(r.nlines, 2);
    assert.equal(r.dataset_format, 'CSV');
  });

  test('a row with the wrong number of columns names its line', async () => {
    const r = await csv('a,b\n1,2\n3\n');
    assert.equal(r.valid, false);
    assert.match(r.error!, /^Line 3: /);
  });

  test('an unclosed quote is a parse error with a line', async () => {
    const r = await csv('a,b\n1,"2\n');
    assert.equal(r.valid, false);
    assert.match(r.error!, /^Line \d+: the CSV cannot be parsed/);
  });

  test('empty, and header only', async () => {
    assert.match((await csv('')).error!, /^Line 1: the file is empty/);
    assert.match((await csv('a,b\n')).error!, /header but no rows/);
  });

  test('resumes at a record boundary', async () => {
    const content = 'a,b\n1,2\n"3\n3",4\n5,6\n';
    const first = await validateCsv(bytes('a,b\n1,2\n'));
    assert.equal(first.ok, true);
    const rest = Buffer.from(content).subarray(first.progress.offset).toString();
    const r = await csv(rest, first.progress);
    assert.equal(r.valid, true, r.error);
    assert.equal(r.nlines, 3);
  });
});

describe('Parquet driver', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-parquet-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  async function writeParquet(
    name: string,
    columns: Array<{ name: string; data: unknown[]; type?: string }>,
    rowGroupSize = 2,
  ) {
    const { parquetWriteFile } = await import('hyparquet-writer');
    const file = path.join(dir, name);
    parquetWriteFile({ filename: file, columnData: columns as never, rowGroupSize });
    return file;
  }
  const size = (f: string) => require('node:fs').statSync(f).size as number;

  test('a tokenized dataset is read row group by row group', async () => {
    const rows = 5;
    const file = await writeParquet('ok.parquet', [
      { name: 'input_ids', data: Array.from({ length: rows }, (_, i) => [1, 2, 3 + i]) },
      { name: 'attention_mask', data: Array.from({ length: rows }, () => [1, 1, 1]) },
      { name: 'labels', data: Array.from({ length: rows }, () => [-100, 2, 3]) },
    ]);
    const groups: number[] = [];
    const outcome = await validateParquet(file, 'fine-tune', {
      fileBytes: size(file),
      onProgress: (p) => groups.push(p.offset),
    });
    const r = buildReport('f', 'parquet', outcome);
    assert.equal(r.valid, true, r.error);
    assert.equal(r.nlines, rows);
    assert.equal(r.dataset_format, 'TOKENIZED');
    assert.deepEqual(groups, [1, 2, 3]);
  });

  test('mismatched lengths name the row; unexpected columns and oversize files are refused', async () => {
    const bad = await writeParquet('bad.parquet', [
      { name: 'input_ids', data: [[1, 2], [1, 2, 3], [4]] },
      { name: 'attention_mask', data: [[1, 1], [1, 1], [1]] },
    ]);
    assert.match(
      buildReport('f', 'parquet', await validateParquet(bad, 'fine-tune', { fileBytes: size(bad) })).error!,
      /^Line 2: `attention_mask` has 2 entries but `input_ids` has 3/,
    );

    const extra = await writeParquet('extra.parquet', [
      { name: 'input_ids', data: [[1]] },
      { name: 'text', data: ['hi'] },
    ]);
    assert.match(
      buildReport('f', 'parquet', await validateParquet(extra, 'fine-tune', { fileBytes: size(extra) })).error!,
      /unexpected column `text`/,
    );

    const ok = await writeParquet('big.parquet', [{ name: 'input_ids', data: [[1]] }]);
    const r = buildReport(
      'f',
      'parquet',
      await validateParquet(ok, 'fine-tune', { fileBytes: size(ok), maxBytes: 10 }),
    );
    assert.match(r.error!, /maximum supported size is 10 bytes/);
  });

  test('a file that is not Parquet says so', async () => {
    const fake = path.join(dir, 'fake.parquet');
    require('node:fs').writeFileSync(fake, 'definitely not parquet, just text');
    const r = buildReport('f', 'parquet', await validateParquet(fake, 'fine-tune', { fileBytes: size(fake) }));
    assert.match(r.error!, /^Line 1: not a readable Parquet file/);
  });
});
