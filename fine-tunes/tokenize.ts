/**
 * Validated dataset records -> the trainer's tokenized rows.
 *
 * A record is rendered as segments of text, each either an input (prompt,
 * user turns, tool results) or an output (completions, assistant turns).
 * train_on_inputs decides which segments are trained: `auto` trains
 * everything for `text` datasets and only outputs for `messages` and
 * `prompt`+`completion` datasets (the spec's rule); `true` trains all; `false`
 * trains outputs only. Rows are cut at max_seq_length; with packing, SFT
 * samples are concatenated into rows of exactly max_seq_length.
 */
import type { DatasetFormat } from '../datasets/records';
import type { ChatTemplate, Tokenizer } from './tokenizer';

export type TrainOnInputs = boolean | 'auto';

export interface Segment {
  text: string;
  /** Outputs are what the model learns to produce. */
  output: boolean;
  /** Message weight 0 turns an output off. */
  weight?: number;
}

export interface SftRow {
  input_ids: number[];
  loss_mask: number[];
  weight?: number;
}

export interface DpoRow {
  chosen_ids: number[];
  chosen_mask: number[];
  rejected_ids: number[];
  rejected_mask: number[];
}

export interface TokenizeOptions {
  tokenizer: Tokenizer;
  format: DatasetFormat;
  maxSeqLength: number;
  trainOnInputs: TrainOnInputs;
}

type Json = Record<string, unknown>;
type Message = {
  role: string;
  content?: unknown;
  reasoning?: string;
  reasoning_content?: string;
  tool_calls?: unknown;
  weight?: number;
};

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    // Text parts are read; images are marked (the reference model has no vision).
    return content.map((p: Json) => (p.type === 'text' ? String(p.text) : '[image]')).join('');
  }
  return '';
}

/** A message through the model's chat template: the header is never trained; the body is an output for assistants. */
function messageSegments(m: Message, chat: ChatTemplate): Segment[] {
  let text = contentText(m.content);
  const reasoning = m.reasoning ?? m.reasoning_content;
  if (reasoning) text = `<think>${reasoning}</think>${text}`;
  if (m.tool_calls) text += JSON.stringify(m.tool_calls);
  const { header, body } = chat.message(m.role, text);
  const segments: Segment[] = [];
  if (header) segments.push({ text: header, output: false });
  segments.push({ text: body, output: m.role === 'assistant', weight: m.weight });
  return segments;
}

/** The conversation as the family's template renders it: its default system message first where it has one. */
function withDefaultSystem(messages: Message[], chat: ChatTemplate): Message[] {
  if (chat.defaultSystem === undefined || messages[0]?.role === 'system') return messages;
  return [{ role: 'system', content: chat.defaultSystem }, ...messages];
}

export function segmentsOf(record: Json, format: DatasetFormat, chat: ChatTemplate): Segment[] {
  switch (format) {
    case 'GENERAL':
      return [{ text: String(record.text), output: false }];
    case 'INSTRUCTION':
      return [
        { text: String(record.prompt), output: false },
        { text: String(record.completion), output: true },
      ];
    case 'CONVERSATION':
      return withDefaultSystem(record.messages as Message[], chat).flatMap((m) => messageSegments(m, chat));
    default:
      throw new Error(`segmentsOf: ${format} records are preference pairs; use preferencePair`);
  }
}

function trained(seg: Segment, format: DatasetFormat, trainOnInputs: TrainOnInputs): boolean {
  if (seg.weight === 0) return false;
  if (trainOnInputs === true) return true;
  if (trainOnInputs === 'auto' && format === 'GENERAL') return true;
  return seg.output;
}

/** Conversations and preference pairs are rendered by the family's chat template. */
const isChat = (format: DatasetFormat) => format === 'CONVERSATION' || format === 'PREFERENCE_OPENAI';

/**
 * The segments' text tokenized as one string, as the model's own tokenizer reads the rendered
 * sample (tokenizing segment by segment would split merges across a boundary, e.g. a header's
 * newline and a message that starts with one). Each token takes the mask of the segment its first
 * byte is in.
 */
function encodeSegments(segments: Segment[], opts: TokenizeOptions, ids: number[], mask: number[]) {
  const text = segments.map((s) => s.text).join('');
  let seg = -1;
  let segEnd = 0;
  let at = 0;
  for (const id of opts.tokenizer.encode(text)) {
    while (at >= segEnd && seg < segments.length - 1) segEnd += Buffer.byteLength(segments[++seg].text);
    ids.push(id);
    mask.push(trained(segments[seg], opts.format, opts.trainOnInputs) ? 1 : 0);
    at += opts.tokenizer.tokenBytes(id);
  }
  if (at !== Buffer.byteLength(text)) {
    throw new Error(`${opts.tokenizer.name}: tokens cover ${at} of ${Buffer.byteLength(text)} bytes of the sample`);
  }
}

/**
 * Tokens and mask of one sample, BOS (where the family has one) first and EOS (trained) last,
 * except where the chat template already ends the conversation with it. Not truncated.
 */
export function encodeSample(segments: Segment[], opts: TokenizeOptions): { ids: number[]; mask: number[] } {
  const ids: number[] = [];
  const mask: number[] = [];
  if (opts.tokenizer.bos !== null) {
    ids.push(opts.tokenizer.bos);
    mask.push(0);
  }
  encodeSegments(segments, opts, ids, mask);
  if (!(isChat(opts.format) && opts.tokenizer.chat.turnsEndWithEos)) {
    ids.push(opts.tokenizer.eos);
    mask.push(1);
  }
  return { ids, mask };
}

export interface SftResult {
  rows: SftRow[];
  samples: number;
  truncated: number;
  trainedTokens: number;
  totalTokens: number;
}

/** SFT rows from records; packing concatenates samples into full-length rows. */
export function tokenizeSft(records: Json[], opts: TokenizeOptions & { packing: boolean }): SftResult {
  const result: SftResult = { rows: [], samples: 0, truncated: 0, trainedTokens: 0, totalTokens: 0 };
  let pack: SftRow = { input_ids: [], loss_mask: [] };
  const flush = () => {
    if (pack.input_ids.length) result.rows.push(pack);
    pack = { input_ids: [], loss_mask: [] };
  };
  for (const record of records) {
    let { ids, mask } = encodeSample(segmentsOf(record, opts.format, opts.tokenizer.chat), opts);
    result.samples++;
    if (ids.length > opts.maxSeqLength) {
      result.truncated++;
      ids = ids.slice(0, opts.maxSeqLength);
      mask = mask.slice(0, opts.maxSeqLength);
    }
    result.totalTokens += ids.length;
    result.trainedTokens += mask.reduce((a, b) => a + b, 0);
    const weight = typeof record.weight === 'number' ? record.weight : undefined;
    if (!opts.packing || weight !== undefined) {
      // Weighted samples stay in rows of their own so the weight applies to them alone.
      result.rows.push({ input_ids: ids, loss_mask: mask, ...(weight !== undefined ? { weight } : {}) });
      continue;
    }
    let offset = 0;
    while (offset < ids.length) {
      const room = opts.maxSeqLength - pack.input_ids.length;
      pack.input_ids.push(...ids.slice(offset, offset + room));
      pack.loss_mask.push(...mask.slice(offset, offset + room));
      offset += room;
      if (pack.input_ids.length === opts.maxSeqLength) flush();
    }
  }
  flush();
  return result;
}

/** A DPO pair: the prompt (input messages, never trained) and the two answers. */
export function tokenizePreference(record: Json, opts: TokenizeOptions): { row: DpoRow; truncated: boolean } {
  const input = record.input as { messages: Message[] };
  const chat = opts.tokenizer.chat;
  const prompt = withDefaultSystem(input.messages, chat)
    .flatMap((m) => messageSegments(m, chat))
    .map((seg) => ({ ...seg, output: false }));
  // The prompt and one answer, rendered as one conversation: the answer's body is what is trained.
  const answer = (key: 'preferred_output' | 'non_preferred_output') => {
    const [m] = record[key] as Message[];
    const { ids, mask } = encodeSample([...prompt, ...messageSegments(m, chat)], { ...opts, trainOnInputs: false });
    const all = ids.slice(0, opts.maxSeqLength);
    return { all, mask: mask.slice(0, opts.maxSeqLength), truncated: ids.length > opts.maxSeqLength };
  };
  const chosen = answer('preferred_output');
  const rejected = answer('non_preferred_output');
  return {
    row: { chosen_ids: chosen.all, chosen_mask: chosen.mask, rejected_ids: rejected.all, rejected_mask: rejected.mask },
    truncated: chosen.truncated || rejected.truncated,
  };
}

/** Half-open [start, end) ranges of trained positions, for previews. */
export function trainedSpans(mask: number[]): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  let start = -1;
  mask.forEach((m, i) => {
    if (m && start < 0) start = i;
    if (!m && start >= 0) {
      spans.push([start, i]);
      start = -1;
    }
  });
  if (start >= 0) spans.push([start, mask.length]);
  return spans;
}
