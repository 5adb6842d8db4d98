/**
 * Per-record rules for uploaded datasets: one already-parsed JSONL record (or
 * one CSV row) at a time, no I/O. The streaming driver owns files, encodings,
 * line numbers and JSON.parse; it prefixes our reasons with `Line <n>: `.
 *
 * The rules follow the spirit of the official SDK's client-side checker
 * (together-ai's check-file.ts: the four formats, roles, 0/1 message weights,
 * preference outputs) and go further where a bad record would otherwise only
 * fail deep inside a training job: tool calls, multimodal parts, reasoning,
 * turn order. Every reason names the field path, what was expected and what
 * was found, so a user can fix the record without reading our code.
 */

export type DatasetPurpose = 'fine-tune' | 'eval';
export type DatasetFormat = 'GENERAL' | 'CONVERSATION' | 'INSTRUCTION' | 'PREFERENCE_OPENAI';

/** Accumulated over the whole file; must be plain JSON (it is saved in Temporal heartbeats and restored). */
export interface RecordsState {
  nlines: number;
  format: DatasetFormat | null;
  has_sample_weights: boolean;
  has_message_weights: boolean;
  is_multimodal: boolean;
  has_tools: boolean;
  has_parallel_tool_calls: boolean;
  has_reasoning: boolean;
}

export function initialRecordsState(): RecordsState {
  return {
    nlines: 0,
    format: null,
    has_sample_weights: false,
    has_message_weights: false,
    is_multimodal: false,
    has_tools: false,
    has_parallel_tool_calls: false,
    has_reasoning: false,
  };
}

/**
 * Checks one parsed JSONL record. Returns null when valid (and updates `state` in place: nlines+1, flags),
 * or a reason string (WITHOUT the "Line n: " prefix; the caller adds it) when invalid (state untouched).
 */
export function checkRecord(value: unknown, purpose: DatasetPurpose, state: RecordsState): string | null {
  if (purpose !== 'eval' && purpose !== 'fine-tune') {
    // A caller bug, not a data problem: it must not reach the user as a line error.
    throw new Error(`checkRecord: unknown dataset purpose ${JSON.stringify(purpose)}`);
  }
  try {
    const record = asObject(value, '', 'a JSON object');
    if (purpose === 'eval') {
      // Eval files feed user-defined templates, so any object shape is legitimate.
      state.nlines += 1;
      return null;
    }
    const ctx = newContext();
    const format = checkFineTuneRecord(record, state.format, ctx);
    // Only a fully valid record may touch the state, so a rejected line leaves it as it was.
    state.nlines += 1;
    state.format ??= format;
    if (ctx.flags !== 0) addFlags(state, ctx.flags);
    return null;
  } catch (err) {
    if (err instanceof Invalid) return err.message;
    throw err;
  }
}

/** Checks the CSV header of an eval file: it must name every column, once. */
export function checkCsvHeader(header: string[]): string | null {
  if (header.length === 0 || header.every((name) => name.trim() === '')) {
    return 'the CSV header is empty; expected the first row to name the columns.';
  }
  // Compared trimmed: " question" and "question" would read as the same column to a person.
  const firstIndex = new Map<string, number>();
  for (const [i, raw] of header.entries()) {
    const name = raw.trim();
    if (name === '') return `CSV header column ${i + 1} is blank; every column needs a name.`;
    const earlier = firstIndex.get(name);
    if (earlier !== undefined) {
      return `CSV header column ${i + 1} ${quote(name)} repeats column ${earlier + 1}; column names must be unique.`;
    }
    firstIndex.set(name, i);
  }
  return null;
}

/** Checks one CSV data row against the header (eval purpose). Returns a reason or null. */
export function checkCsvRow(header: string[], row: string[]): string | null {
  // Empty cells are accepted on purpose: eval columns such as a reference answer may be optional.
  if (row.length !== header.length) {
    return `expected ${count(header.length, 'column')} as in the header, found ${row.length}.`;
  }
  return null;
}

// ---------------------------------------------------------------------------
// Failure plumbing and wording

/** Thrown by the rules below and turned into the returned reason by checkRecord; never escapes. */
class Invalid extends Error {}

function fail(reason: string): never {
  throw new Invalid(reason);
}

type Json = Record<string, unknown>;

/**
 * Where an item of a list is (`messages[3]`), spelled out only when a reason needs it (a template
 * literal turns it into text): one per list, moved from item to item, so the valid path builds no
 * string per message.
 */
class ItemPath {
  index = 0;
  constructor(readonly list: string) {}
  toString(): string {
    return `${this.list}[${this.index}]`;
  }
}

/** A field path in a reason. */
type Path = string | ItemPath;

const MAX_QUOTE = 60;

/** Quotes a user string for a reason, cut short so a huge value never floods the error. */
function quote(s: string): string {
  if (s.length <= MAX_QUOTE) return JSON.stringify(s);
  let head = s.slice(0, MAX_QUOTE - 3);
  // Do not leave half a surrogate pair behind; it would print as an escape.
  if (/[\uD800-\uDBFF]$/.test(head)) head = head.slice(0, -1);
  return `${JSON.stringify(head).slice(0, -1)}..."`;
}

/** The JSON type of a value, as a user would say it; for "expected X, found Y" on a type mismatch. */
function kind(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return v.length === 0 ? 'an empty array' : 'array';
  if (v === '') return 'an empty string';
  return typeof v;
}

/** The value itself where it is short and telling (a bad role, a bad weight); else its kind. */
function show(v: unknown): string {
  if (typeof v === 'string' && v !== '') return quote(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return kind(v);
}

function expected(path: Path, what: string, value: unknown, found: (v: unknown) => string = kind): string {
  if (value === undefined) return `${path} is missing; expected ${what}.`;
  return `${path}: expected ${what}, found ${found(value)}.`;
}

/** Lists names for a reason, at most a handful, so a record with hundreds of keys stays one line. */
function listOf(names: Iterable<string>, max = 8): string {
  const all = [...names];
  const shown = all.slice(0, max).map(quote).join(', ');
  return all.length > max ? `${shown} and ${all.length - max} more` : shown;
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** "a user message", "an assistant message". */
function aRole(role: string): string {
  return `${role === 'assistant' ? 'an' : 'a'} ${role}`;
}

// ---------------------------------------------------------------------------
// Shape helpers. Keys are read as own properties only: JSON.parse can produce
// "constructor" or "__proto__" keys, and `in` would also see Object.prototype.
// The hot path (messages, records) reads an object's keys once, in one `for ... in`
// pass over its own keys (JSON.parse makes no others enumerable), into bits of a
// table without a prototype (keyBits): every later "has it X?" is a bit test. A
// key named in such a table is a plain data key no Object.prototype has, so its
// value is read directly: it is the object's own, or undefined.

function has(obj: Json, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(obj, key);
}

function get(obj: Json, key: string): unknown {
  return has(obj, key) ? obj[key] : undefined;
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function asObject(v: unknown, path: Path, what: string): Json {
  if (isObject(v)) return v;
  if (path === '') fail(`expected ${what}, found ${kind(v)}.`);
  fail(expected(path, what, v));
}

function asNonEmptyString(v: unknown, path: string): string {
  if (typeof v !== 'string' || v === '') fail(expected(path, 'a non-empty string', v));
  return v;
}

/**
 * Keys as bits: `bit.<key>` where the code names a key, `lookup` for a key read from data (a Map:
 * a record's "constructor" key is no entry of it, as it would be of an object).
 */
interface BitTable<K extends string> {
  bit: Readonly<Record<K, number>>;
  lookup: ReadonlyMap<string, number>;
}

function bitTable<K extends string>(keys: readonly K[]): BitTable<K> {
  const lookup = new Map(keys.map((k, i) => [k as string, 1 << i]));
  return { bit: Object.fromEntries(lookup) as Record<K, number>, lookup };
}

/** The names of the keys whose bits are set, in the table's order. */
function namesOf(table: BitTable<string>, bits: number): string[] {
  return [...table.lookup].filter(([, bit]) => bits & bit).map(([k]) => k);
}

/**
 * The object's keys as bits of `table`, in one pass; a key outside `allowed` (bits of the table) is
 * refused, the first one in the object's order, naming what `owner` allows.
 */
function keyBits(obj: Json, path: Path, table: BitTable<string>, allowed: number, owner: string): number {
  let bits = 0;
  for (const key in obj) {
    const bit = table.lookup.get(key);
    if (bit === undefined || (bit & allowed) === 0) {
      const where = path === '' ? '' : `${path}: `;
      fail(`${where}unexpected key ${quote(key)}; ${owner} allows only ${namesOf(table, allowed).join(', ')}.`);
    }
    bits |= bit;
  }
  return bits;
}

function rejectUnknownKeys(obj: Json, path: string, allowed: readonly string[], owner: string): void {
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) {
      const where = path === '' ? '' : `${path}: `;
      fail(`${where}unexpected key ${quote(key)}; ${owner} allows only ${allowed.join(', ')}.`);
    }
  }
}

// ---------------------------------------------------------------------------
// Formats

type Flag = Exclude<keyof RecordsState, 'nlines' | 'format'>;

/** What one record contributes to the state once it is known to be valid, as bits of a number. */
const FLAGS: readonly Flag[] = [
  'has_sample_weights',
  'has_message_weights',
  'is_multimodal',
  'has_tools',
  'has_parallel_tool_calls',
  'has_reasoning',
];
const FLAG_BIT = bitTable(FLAGS).bit;

/** Sets the state's flags that `flags` has (named stores: this runs for most records). */
function addFlags(state: RecordsState, flags: number): void {
  if (flags & FLAG_BIT.has_sample_weights) state.has_sample_weights = true;
  if (flags & FLAG_BIT.has_message_weights) state.has_message_weights = true;
  if (flags & FLAG_BIT.is_multimodal) state.is_multimodal = true;
  if (flags & FLAG_BIT.has_tools) state.has_tools = true;
  if (flags & FLAG_BIT.has_parallel_tool_calls) state.has_parallel_tool_calls = true;
  if (flags & FLAG_BIT.has_reasoning) state.has_reasoning = true;
}

const REQUIRED_KEYS: Record<DatasetFormat, readonly string[]> = {
  GENERAL: ['text'],
  CONVERSATION: ['messages'],
  INSTRUCTION: ['prompt', 'completion'],
  PREFERENCE_OPENAI: ['input', 'preferred_output', 'non_preferred_output'],
};

const OPTIONAL_KEYS: Record<DatasetFormat, readonly string[]> = {
  GENERAL: ['weight'],
  CONVERSATION: ['tools', 'weight'],
  INSTRUCTION: ['weight'],
  PREFERENCE_OPENAI: ['tools', 'weight'],
};

const FORMATS = Object.keys(REQUIRED_KEYS) as DatasetFormat[];

/** Every key a record of any format may have, as bits (keyBits). */
const RECORD_KEYS = bitTable([...new Set(FORMATS.flatMap((f) => [...REQUIRED_KEYS[f], ...OPTIONAL_KEYS[f]]))]);
const RECORD_KEY = RECORD_KEYS.bit;
const maskOf = (keys: readonly string[]) => keys.reduce((m, k) => m | RECORD_KEY[k], 0);
const REQUIRED_MASK = Object.fromEntries(FORMATS.map((f) => [f, maskOf(REQUIRED_KEYS[f])])) as Record<
  DatasetFormat,
  number
>;
const ALLOWED_MASK = Object.fromEntries(
  FORMATS.map((f) => [f, maskOf([...REQUIRED_KEYS[f], ...OPTIONAL_KEYS[f]])]),
) as Record<DatasetFormat, number>;

function checkFineTuneRecord(record: Json, firstFormat: DatasetFormat | null, ctx: Context): DatasetFormat {
  const keys = recordKeys(record);
  const format = detectFormat(record, keys);
  if (firstFormat !== null && format !== firstFormat) {
    fail(
      `record is ${format} but the first record is ${firstFormat}; every record of a file must use the first record's format.`,
    );
  }
  checkSampleWeight(record, keys, ctx);
  CHECK_FORMAT[format](record, keys, ctx);
  return format;
}

function describeKeys(format: DatasetFormat): string {
  return `${REQUIRED_KEYS[format].map((k) => JSON.stringify(k)).join(' + ')} (${format})`;
}

/** Each format's keys, required and optional, computed once. */
const ALLOWED_KEYS: Record<DatasetFormat, ReadonlySet<string>> = {
  GENERAL: new Set([...REQUIRED_KEYS.GENERAL, ...OPTIONAL_KEYS.GENERAL]),
  CONVERSATION: new Set([...REQUIRED_KEYS.CONVERSATION, ...OPTIONAL_KEYS.CONVERSATION]),
  INSTRUCTION: new Set([...REQUIRED_KEYS.INSTRUCTION, ...OPTIONAL_KEYS.INSTRUCTION]),
  PREFERENCE_OPENAI: new Set([...REQUIRED_KEYS.PREFERENCE_OPENAI, ...OPTIONAL_KEYS.PREFERENCE_OPENAI]),
};

/** A record key no format has. */
const UNKNOWN_KEY = 1 << 30;

/** The record's keys as bits of RECORD_KEYS, with UNKNOWN_KEY for any other (one pass over them). */
function recordKeys(record: Json): number {
  let keys = 0;
  for (const key in record) keys |= RECORD_KEYS.lookup.get(key) ?? UNKNOWN_KEY;
  return keys;
}

function detectFormat(record: Json, keys: number): DatasetFormat {
  // Runs for every record of a file: bit tests, nothing allocated unless the record is refused.
  let format: DatasetFormat | null = null;
  for (const f of FORMATS) {
    if ((keys & REQUIRED_MASK[f]) !== REQUIRED_MASK[f]) continue;
    if (format !== null) {
      const full = FORMATS.filter((g) => (keys & REQUIRED_MASK[g]) === REQUIRED_MASK[g]);
      fail(`record has the keys of ${full.map(describeKeys).join(' and ')}; a record must use exactly one format.`);
    }
    format = f;
  }
  if (format === null) fail(noFormatReason(record, Object.keys(record)));
  if ((keys & ~ALLOWED_MASK[format]) !== 0) {
    const allowed = ALLOWED_KEYS[format];
    for (const key in record) {
      if (!allowed.has(key)) {
        fail(
          `unexpected key ${quote(key)}; a ${format} record allows ${listOf(REQUIRED_KEYS[format])} and optionally ${listOf(OPTIONAL_KEYS[format])}.`,
        );
      }
    }
  }
  return format;
}

function noFormatReason(record: Json, keys: string[]): string {
  // Half of a multi-key format (a "prompt" without "completion") is almost always a typo or an
  // omission: naming the missing key helps more than the list of every format.
  const partial = FORMATS.filter((f) => REQUIRED_KEYS[f].some((k) => has(record, k)));
  if (partial.length === 1) {
    const format = partial[0];
    const missing = REQUIRED_KEYS[format].filter((k) => !has(record, k));
    return `missing ${missing.length === 1 ? 'key' : 'keys'} ${listOf(missing)} for the ${format} format, which needs ${REQUIRED_KEYS[format].map((k) => JSON.stringify(k)).join(' and ')}.`;
  }
  const found = keys.length === 0 ? 'no keys' : `keys ${listOf(keys)}`;
  return `found ${found}, which match no dataset format; expected one of ${FORMATS.map(describeKeys).join(', ')}.`;
}

function checkSampleWeight(record: Json, keys: number, ctx: Context): void {
  if (!(keys & RECORD_KEY.weight)) return;
  const w = record.weight;
  // JSON has no NaN or Infinity, but a string "NaN" or a missing value must not slip through either.
  if (typeof w !== 'number' || !Number.isFinite(w)) fail(expected('weight', 'a finite number >= 0', w));
  if (w < 0) fail(expected('weight', 'a number >= 0', w, show));
  ctx.flags |= FLAG_BIT.has_sample_weights;
}

const CHECK_FORMAT: Record<DatasetFormat, (record: Json, keys: number, ctx: Context) => void> = {
  GENERAL: (record) => {
    asNonEmptyString(record.text, 'text');
  },
  INSTRUCTION: (record) => {
    // An empty prompt is a legitimate unconditional example; an empty completion trains nothing.
    if (typeof record.prompt !== 'string') fail(expected('prompt', 'a string', record.prompt));
    asNonEmptyString(record.completion, 'completion');
  },
  CONVERSATION: (record, keys, ctx) => {
    if (keys & RECORD_KEY.tools) ctx.toolNames = checkTools(record.tools, 'tools', ctx);
    checkConversation(record.messages, 'messages', ctx, 'training');
  },
  PREFERENCE_OPENAI: (record, _keys, ctx) => checkPreference(record, ctx),
};

// ---------------------------------------------------------------------------
// Conversations

type Role = 'system' | 'user' | 'assistant' | 'tool';
const ROLES: readonly Role[] = ['system', 'user', 'assistant', 'tool'];

const MESSAGE_KEYS = [
  'role',
  'content',
  'weight',
  'tool_calls',
  'tool_call_id',
  'name',
  'reasoning',
  'reasoning_content',
] as const;
/** A message's keys as bits (keyBits); preference outputs allow fewer of them. */
const MESSAGE_KEY_BITS = bitTable(MESSAGE_KEYS);
const MSG = MESSAGE_KEY_BITS.bit;
const MESSAGE_ALLOWED = MESSAGE_KEYS.reduce((m, k) => m | MSG[k], 0);

/** Per-record context shared by the conversation, tool and output checks. */
interface Context {
  /** Bits of FLAG_BIT. */
  flags: number;
  /** Function names declared in `tools`; null when the record declares none (then any name goes). */
  toolNames: Set<string> | null;
  /** Every tool call id seen in the record, with where it was first used (null until the first). */
  callIds: Map<string, string> | null;
}

function newContext(): Context {
  return { flags: 0, toolNames: null, callIds: null };
}

/** The tool calls of the latest assistant message that tool messages are still answering. */
interface CallBlock {
  from: string;
  pending: Map<string, string>; // id -> path of the call
  answered: Map<string, string>; // id -> path of the tool message that answered it
}

interface Walk {
  path: string;
  prevRole: Role | null;
  block: CallBlock | null;
  sawAssistant: boolean;
}

/**
 * `training`: a CONVERSATION record, which must teach at least one assistant turn and end on one.
 * `prompt`: a preference input, which leads up to the assistant reply and so must not contain its end.
 */
type ConversationUse = 'training' | 'prompt';

function checkConversation(value: unknown, path: string, ctx: Context, use: ConversationUse): void {
  if (!Array.isArray(value) || value.length === 0) fail(expected(path, 'a non-empty array of messages', value));
  const walk: Walk = { path, prevRole: null, block: null, sawAssistant: false };
  const at = new ItemPath(path);
  for (let i = 0; i < value.length; i++) {
    at.index = i;
    checkMessage(value[i], i, at, walk, ctx);
  }
  checkEnd(value as unknown[], walk, use);
}

function checkMessage(raw: unknown, i: number, p: ItemPath, walk: Walk, ctx: Context): void {
  const msg = asObject(raw, p, 'a message object');
  const keys = keyBits(msg, p, MESSAGE_KEY_BITS, MESSAGE_ALLOWED, 'a message');
  const role = checkRole(msg, p);
  checkRoleOnlyKeys(keys, p, role);
  checkTurn(msg, role, i, p, walk);
  checkContent(msg, keys, p, role, { allowParts: true }, ctx);
  checkMessageWeight(msg, keys, p, ctx);
  if (keys & MSG.name && typeof msg.name !== 'string') fail(expected(`${p}.name`, 'a string', msg.name));
  if (keys & MSG.tool_calls) {
    const calls = checkToolCalls(msg.tool_calls, `${p}.tool_calls`, ctx);
    walk.block = { from: String(p), pending: calls, answered: new Map() };
  }
  checkReasoning(msg, keys, p, ctx);
  walk.prevRole = role;
  walk.sawAssistant ||= role === 'assistant';
}

function checkRole(msg: Json, p: Path): Role {
  const role = msg.role;
  if (!ROLES.includes(role as Role)) fail(expected(`${p}.role`, `one of ${ROLES.join(', ')}`, role, show));
  return role as Role;
}

/** Keys that only make sense on one role; elsewhere they mean the record was assembled wrongly. */
const ROLE_ONLY_KEYS: ReadonlyArray<readonly [(typeof MESSAGE_KEYS)[number], Role]> = [
  ['tool_calls', 'assistant'],
  ['tool_call_id', 'tool'],
  ['reasoning', 'assistant'],
  ['reasoning_content', 'assistant'],
];

const ROLE_ONLY_MASK = ROLE_ONLY_KEYS.reduce((m, [k]) => m | MSG[k], 0);

function checkRoleOnlyKeys(keys: number, p: Path, role: Role): void {
  if ((keys & ROLE_ONLY_MASK) === 0) return;
  for (const [key, owner] of ROLE_ONLY_KEYS) {
    if (keys & MSG[key] && role !== owner) {
      fail(`${p}.${key}: only ${owner} messages may have ${key}, found it on ${aRole(role)} message.`);
    }
  }
}

/**
 * Turn order: optional system first, then user; user -> assistant; assistant -> user, or -> tool
 * when it made tool calls; tool -> tool while calls are unanswered, then -> assistant.
 */
function checkTurn(msg: Json, role: Role, i: number, p: Path, walk: Walk): void {
  if (role === 'system') {
    if (i !== 0) fail(`${p}.role: a system message is only allowed as the first message.`);
    return;
  }
  if (role === 'tool') return answerCall(msg, p, walk);
  // Any user or assistant message closes the tool block; calls still open then were never answered.
  if (walk.block !== null) {
    failIfUnanswered(walk.block, `before ${p}`);
    if (role === 'user') {
      fail(`${p}.role: expected "assistant" after the tool results of ${walk.block.from}, found "user".`);
    }
    walk.block = null;
  }
  const prev = walk.prevRole;
  if (prev === null || prev === 'system') {
    if (role !== 'user') {
      fail(`${p}.role: expected "user" as the first message after the optional system message, found ${quote(role)}.`);
    }
    return;
  }
  if (prev === role) {
    const other = role === 'user' ? 'an assistant reply' : 'a user message';
    fail(
      `${p}.role: two ${role} messages in a row (${walk.path}[${i - 1}] and ${p}); merge them or put ${other} between.`,
    );
  }
}

function answerCall(msg: Json, p: Path, walk: Walk): void {
  const block = walk.block;
  if (block === null) {
    const found =
      walk.prevRole === null
        ? 'found it first'
        : walk.prevRole === 'assistant'
          ? 'found it after an assistant message without tool_calls'
          : `found it after ${aRole(walk.prevRole)} message`;
    fail(`${p}.role: a tool message must follow an assistant message with tool_calls, ${found}.`);
  }
  const id = msg.tool_call_id;
  if (typeof id !== 'string' || id === '') fail(expected(`${p}.tool_call_id`, 'a non-empty string', id));
  if (block.pending.delete(id)) {
    block.answered.set(id, String(p));
    return;
  }
  const earlier = block.answered.get(id);
  if (earlier !== undefined) fail(`${p}.tool_call_id: call ${quote(id)} is already answered by ${earlier}.`);
  const open =
    block.pending.size > 0 ? `its unanswered calls are ${listOf(block.pending.keys())}` : 'all its calls are answered';
  fail(`${p}.tool_call_id: ${quote(id)} matches no call of ${block.from}; ${open}.`);
}

function failIfUnanswered(block: CallBlock, when: string): void {
  const first = block.pending.entries().next();
  if (first.done) return;
  const [id, callPath] = first.value;
  fail(`${callPath} (id ${quote(id)}) is never answered; expected a tool message with that tool_call_id ${when}.`);
}

function checkEnd(messages: unknown[], walk: Walk, use: ConversationUse): void {
  if (walk.block !== null) failIfUnanswered(walk.block, 'before the end of the conversation');
  const last = `${walk.path}[${messages.length - 1}]`;
  if (walk.prevRole === 'system') fail(`${walk.path}: expected a user message after the system message, found none.`);
  if (use === 'prompt') {
    if (walk.prevRole === 'assistant') {
      fail(`${last}.role: the input must not end with an assistant message; the reply belongs in the outputs.`);
    }
    return;
  }
  if (!walk.sawAssistant) {
    fail(
      `${walk.path}: expected at least one assistant message, found none; a conversation without one trains nothing.`,
    );
  }
  if (walk.prevRole !== 'assistant') {
    fail(
      `${last}.role: expected the last message to be "assistant", found ${quote(walk.prevRole ?? '')}; a trailing ${walk.prevRole} turn trains nothing.`,
    );
  }
}

// ---------------------------------------------------------------------------
// Message fields

interface ContentRules {
  /** Multimodal part arrays; preference outputs take plain strings only. */
  allowParts: boolean;
}

function checkContent(msg: Json, keys: number, p: Path, role: Role, rules: ContentRules, ctx: Context): void {
  const content = msg.content;
  // The common case first, with nothing built for it: a non-empty string from anyone but a tool.
  if (typeof content === 'string' && content !== '' && role !== 'tool') return;
  const path = `${p}.content`;
  if (role === 'tool') {
    // A tool may legitimately return nothing, so only the type is checked.
    if (typeof content !== 'string') fail(expected(path, 'a string', content));
    return;
  }
  // An assistant turn that only calls tools has nothing to say; every other turn must say something.
  const mayBeEmpty = role === 'assistant' && (keys & MSG.tool_calls) !== 0;
  const what = rules.allowParts ? 'a non-empty string or an array of content parts' : 'a non-empty string';
  if (content === undefined || content === null || content === '') {
    if (mayBeEmpty) return;
    fail(expected(path, role === 'assistant' ? `${what} (it may be empty only with tool_calls)` : what, content));
  }
  if (!rules.allowParts || !Array.isArray(content) || content.length === 0) fail(expected(path, what, content));
  for (const [j, part] of content.entries()) checkPart(part, `${path}[${j}]`, ctx);
}

function checkPart(raw: unknown, path: string, ctx: Context): void {
  const part = asObject(raw, path, 'a content part object');
  const type = get(part, 'type');
  if (type === 'text') {
    if (typeof get(part, 'text') !== 'string') fail(expected(`${path}.text`, 'a string', get(part, 'text')));
    return;
  }
  if (type !== 'image_url') fail(expected(`${path}.type`, '"text" or "image_url"', type, show));
  const image = asObject(get(part, 'image_url'), `${path}.image_url`, 'an object with a url');
  checkImageUrl(get(image, 'url'), `${path}.image_url.url`);
  ctx.flags |= FLAG_BIT.is_multimodal;
}

// Inline images must say they are images and carry a payload; remote ones must be fetchable over http(s).
const IMAGE_URL = /^(data:image\/[a-z0-9.+-]+;base64,.|https?:\/\/\S)/i;

function checkImageUrl(url: unknown, path: string): void {
  const what = 'a data:image/...;base64, URL or an http(s) URL';
  if (typeof url !== 'string' || url === '') fail(expected(path, what, url));
  if (!IMAGE_URL.test(url)) fail(expected(path, what, url, show));
}

function checkMessageWeight(msg: Json, keys: number, p: Path, ctx: Context): void {
  if (!(keys & MSG.weight)) return;
  // Message weights are a loss mask, so fractions are meaningless: only 0 (masked) or 1 (trained).
  if (msg.weight !== 0 && msg.weight !== 1) fail(expected(`${p}.weight`, 'the integer 0 or 1', msg.weight, show));
  ctx.flags |= FLAG_BIT.has_message_weights;
}

function checkReasoning(msg: Json, keys: number, p: Path, ctx: Context): void {
  const reasoning = (keys & MSG.reasoning) !== 0;
  const legacy = (keys & MSG.reasoning_content) !== 0;
  if (!reasoning && !legacy) return;
  if (reasoning && legacy) {
    fail(`${p}: has both reasoning and reasoning_content; keep one (reasoning_content is the legacy name).`);
  }
  const key = reasoning ? 'reasoning' : 'reasoning_content';
  if (typeof msg[key] !== 'string') fail(expected(`${p}.${key}`, 'a string', msg[key]));
  ctx.flags |= FLAG_BIT.has_reasoning;
}

// ---------------------------------------------------------------------------
// Tools

/** Checks a `tools` array and returns the declared function names. */
function checkTools(value: unknown, path: string, ctx: Context): Set<string> {
  if (!Array.isArray(value)) fail(expected(path, 'an array of tool definitions', value));
  const names = new Map<string, string>();
  for (const [i, raw] of value.entries()) {
    const p = `${path}[${i}]`;
    const name = checkToolDefinition(raw, p);
    const earlier = names.get(name);
    if (earlier !== undefined) fail(`${p}.function.name: ${quote(name)} is already declared by ${earlier}.`);
    names.set(name, p);
  }
  // An empty list is common boilerplate in exported datasets and declares nothing.
  if (names.size > 0) ctx.flags |= FLAG_BIT.has_tools;
  return new Set(names.keys());
}

function checkToolDefinition(raw: unknown, p: string): string {
  const tool = asObject(raw, p, 'a tool definition object');
  if (get(tool, 'type') !== 'function') fail(expected(`${p}.type`, '"function"', get(tool, 'type'), show));
  const fn = asObject(get(tool, 'function'), `${p}.function`, 'an object with a name');
  const name = asNonEmptyString(get(fn, 'name'), `${p}.function.name`);
  if (has(fn, 'description') && typeof fn.description !== 'string') {
    fail(expected(`${p}.function.description`, 'a string', fn.description));
  }
  if (has(fn, 'parameters') && !isObject(fn.parameters)) {
    fail(expected(`${p}.function.parameters`, 'a JSON schema object', fn.parameters));
  }
  return name;
}

/** Checks a message's `tool_calls` and returns its calls as id -> path, for the tool messages to answer. */
function checkToolCalls(value: unknown, path: string, ctx: Context): Map<string, string> {
  if (!Array.isArray(value) || value.length === 0) fail(expected(path, 'a non-empty array of tool calls', value));
  const calls = new Map<string, string>();
  for (const [i, raw] of value.entries()) {
    const p = `${path}[${i}]`;
    const id = checkToolCall(raw, p, ctx);
    ctx.callIds ??= new Map();
    const earlier = ctx.callIds.get(id);
    if (earlier !== undefined) {
      fail(`${p}.id: ${quote(id)} is already used by ${earlier}; call ids must be unique within a record.`);
    }
    ctx.callIds.set(id, p);
    calls.set(id, p);
  }
  ctx.flags |= FLAG_BIT.has_tools;
  if (value.length > 1) ctx.flags |= FLAG_BIT.has_parallel_tool_calls;
  return calls;
}

function checkToolCall(raw: unknown, p: string, ctx: Context): string {
  const call = asObject(raw, p, 'a tool call object');
  const id = asNonEmptyString(get(call, 'id'), `${p}.id`);
  if (get(call, 'type') !== 'function') fail(expected(`${p}.type`, '"function"', get(call, 'type'), show));
  const fn = asObject(get(call, 'function'), `${p}.function`, 'an object with name and arguments');
  const name = asNonEmptyString(get(fn, 'name'), `${p}.function.name`);
  if (ctx.toolNames !== null && !ctx.toolNames.has(name)) {
    const declared = ctx.toolNames.size > 0 ? listOf(ctx.toolNames, 5) : 'none';
    fail(`${p}.function.name: ${quote(name)} is not a function declared in tools (declared: ${declared}).`);
  }
  checkArguments(get(fn, 'arguments'), `${p}.function.arguments`);
  return id;
}

function checkArguments(args: unknown, path: string): void {
  // OpenAI-style calls carry arguments as JSON text, not as an object; the chat template relies on that.
  if (typeof args !== 'string') fail(expected(path, 'a string holding JSON', args));
  try {
    JSON.parse(args);
  } catch {
    fail(`${path}: expected a string holding JSON, found text that does not parse: ${quote(args)}.`);
  }
}

// ---------------------------------------------------------------------------
// Preference (DPO) records

const INPUT_KEYS = ['messages', 'tools'] as const;
const OUTPUT_KEYS = ['role', 'content', 'tool_calls', 'reasoning', 'reasoning_content'] as const;
const OUTPUT_ALLOWED = OUTPUT_KEYS.reduce((m, k) => m | MSG[k], 0);

function checkPreference(record: Json, ctx: Context): void {
  const input = asObject(record.input, 'input', 'an object with messages');
  rejectUnknownKeys(input, 'input', INPUT_KEYS, 'input');
  if (has(input, 'tools') && has(record, 'tools')) {
    fail('tools is given both at the top level and in input; give it once.');
  }
  if (has(input, 'tools')) ctx.toolNames = checkTools(input.tools, 'input.tools', ctx);
  else if (has(record, 'tools')) ctx.toolNames = checkTools(record.tools, 'tools', ctx);
  checkConversation(get(input, 'messages'), 'input.messages', ctx, 'prompt');
  // The two outputs are alternatives, so each may reuse the other's call ids, not the input's.
  const inputIds = ctx.callIds;
  for (const key of ['preferred_output', 'non_preferred_output']) {
    ctx.callIds = inputIds && new Map(inputIds);
    checkOutput(record[key], key, ctx);
  }
  if (canonical(record.preferred_output) === canonical(record.non_preferred_output)) {
    fail('preferred_output and non_preferred_output are identical; identical outputs teach nothing.');
  }
}

function checkOutput(value: unknown, path: string, ctx: Context): void {
  if (!Array.isArray(value) || value.length !== 1) {
    const found = Array.isArray(value) ? `${count(value.length, 'message')}` : kind(value);
    fail(`${path}: expected an array with exactly one assistant message, found ${found}.`);
  }
  const p = `${path}[0]`;
  const msg = asObject(value[0], p, 'a message object');
  const keys = keyBits(msg, p, MESSAGE_KEY_BITS, OUTPUT_ALLOWED, 'an output message');
  if (msg.role !== 'assistant') fail(expected(`${p}.role`, '"assistant"', msg.role, show));
  checkContent(msg, keys, p, 'assistant', { allowParts: false }, ctx);
  // No tool results follow an output: the pair is compared on the call itself.
  if (keys & MSG.tool_calls) checkToolCalls(msg.tool_calls, `${p}.tool_calls`, ctx);
  checkReasoning(msg, keys, p, ctx);
}

/** JSON text with sorted keys, so two outputs that differ only in key order count as identical. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_key, val: unknown) =>
    isObject(val)
      ? Object.fromEntries(
          Object.keys(val)
            .sort()
            .map((k) => [k, val[k]]),
        )
      : val,
  );
}
