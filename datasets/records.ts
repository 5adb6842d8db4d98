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
    const found = checkFineTuneRecord(record, state.format);
    // Only a fully valid record may touch the state, so a rejected line leaves it as it was.
    state.nlines += 1;
    state.format ??= found.format;
    for (const flag of found.flags) state[flag] = true;
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

function expected(path: string, what: string, value: unknown, found: (v: unknown) => string = kind): string {
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

function has(obj: Json, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(obj, key);
}

function get(obj: Json, key: string): unknown {
  return has(obj, key) ? obj[key] : undefined;
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function asObject(v: unknown, path: string, what: string): Json {
  if (isObject(v)) return v;
  if (path === '') fail(`expected ${what}, found ${kind(v)}.`);
  fail(expected(path, what, v));
}

function asNonEmptyString(v: unknown, path: string): string {
  if (typeof v !== 'string' || v === '') fail(expected(path, 'a non-empty string', v));
  return v;
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

/** What one record contributes to the state once it is known to be valid. */
interface Findings {
  format: DatasetFormat;
  flags: Set<Flag>;
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

function checkFineTuneRecord(record: Json, firstFormat: DatasetFormat | null): Findings {
  const format = detectFormat(record);
  if (firstFormat !== null && format !== firstFormat) {
    fail(
      `record is ${format} but the first record is ${firstFormat}; every record of a file must use the first record's format.`,
    );
  }
  const ctx = newContext();
  checkSampleWeight(record, ctx);
  CHECK_FORMAT[format](record, ctx);
  return { format, flags: ctx.flags };
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

function hasAll(record: Json, keys: readonly string[]): boolean {
  for (const k of keys) if (!has(record, k)) return false;
  return true;
}

function detectFormat(record: Json): DatasetFormat {
  // Runs for every record of a file: plain loops, nothing allocated unless the record is refused.
  let format: DatasetFormat | null = null;
  for (const f of FORMATS) {
    if (!hasAll(record, REQUIRED_KEYS[f])) continue;
    if (format !== null) {
      const full = FORMATS.filter((g) => hasAll(record, REQUIRED_KEYS[g]));
      fail(`record has the keys of ${full.map(describeKeys).join(' and ')}; a record must use exactly one format.`);
    }
    format = f;
  }
  if (format === null) fail(noFormatReason(record, Object.keys(record)));
  const allowed = ALLOWED_KEYS[format];
  for (const key in record) {
    if (has(record, key) && !allowed.has(key)) {
      fail(
        `unexpected key ${quote(key)}; a ${format} record allows ${listOf(REQUIRED_KEYS[format])} and optionally ${listOf(OPTIONAL_KEYS[format])}.`,
      );
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

function checkSampleWeight(record: Json, ctx: Context): void {
  if (!has(record, 'weight')) return;
  const w = record.weight;
  // JSON has no NaN or Infinity, but a string "NaN" or a missing value must not slip through either.
  if (typeof w !== 'number' || !Number.isFinite(w)) fail(expected('weight', 'a finite number >= 0', w));
  if (w < 0) fail(expected('weight', 'a number >= 0', w, show));
  ctx.flags.add('has_sample_weights');
}

const CHECK_FORMAT: Record<DatasetFormat, (record: Json, ctx: Context) => void> = {
  GENERAL: (record) => {
    asNonEmptyString(record.text, 'text');
  },
  INSTRUCTION: (record) => {
    // An empty prompt is a legitimate unconditional example; an empty completion trains nothing.
    if (typeof record.prompt !== 'string') fail(expected('prompt', 'a string', record.prompt));
    asNonEmptyString(record.completion, 'completion');
  },
  CONVERSATION: (record, ctx) => {
    if (has(record, 'tools')) ctx.toolNames = checkTools(record.tools, 'tools', ctx);
    checkConversation(record.messages, 'messages', ctx, 'training');
  },
  PREFERENCE_OPENAI: (record, ctx) => checkPreference(record, ctx),
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

/** Per-record context shared by the conversation, tool and output checks. */
interface Context {
  flags: Set<Flag>;
  /** Function names declared in `tools`; null when the record declares none (then any name goes). */
  toolNames: Set<string> | null;
  /** Every tool call id seen in the record, with where it was first used. */
  callIds: Map<string, string>;
}

function newContext(): Context {
  return { flags: new Set(), toolNames: null, callIds: new Map() };
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
  for (let i = 0; i < value.length; i++) checkMessage(value[i], i, walk, ctx);
  checkEnd(value as unknown[], walk, use);
}

function checkMessage(raw: unknown, i: number, walk: Walk, ctx: Context): void {
  const p = `${walk.path}[${i}]`;
  const msg = asObject(raw, p, 'a message object');
  rejectUnknownKeys(msg, p, MESSAGE_KEYS, 'a message');
  const role = checkRole(msg, p);
  checkRoleOnlyKeys(msg, p, role);
  checkTurn(msg, role, i, p, walk);
  checkContent(msg, p, role, { allowParts: true }, ctx);
  checkMessageWeight(msg, p, ctx);
  if (has(msg, 'name') && typeof msg.name !== 'string') fail(expected(`${p}.name`, 'a string', msg.name));
  if (has(msg, 'tool_calls')) {
    const calls = checkToolCalls(msg.tool_calls, `${p}.tool_calls`, ctx);
    walk.block = { from: p, pending: calls, answered: new Map() };
  }
  checkReasoning(msg, p, ctx);
  walk.prevRole = role;
  walk.sawAssistant ||= role === 'assistant';
}

function checkRole(msg: Json, p: string): Role {
  const role = get(msg, 'role');
  if (!ROLES.includes(role as Role)) fail(expected(`${p}.role`, `one of ${ROLES.join(', ')}`, role, show));
  return role as Role;
}

/** Keys that only make sense on one role; elsewhere they mean the record was assembled wrongly. */
const ROLE_ONLY_KEYS: ReadonlyArray<readonly [string, Role]> = [
  ['tool_calls', 'assistant'],
  ['tool_call_id', 'tool'],
  ['reasoning', 'assistant'],
  ['reasoning_content', 'assistant'],
];

function checkRoleOnlyKeys(msg: Json, p: string, role: Role): void {
  for (const [key, owner] of ROLE_ONLY_KEYS) {
    if (has(msg, key) && role !== owner) {
      fail(`${p}.${key}: only ${owner} messages may have ${key}, found it on ${aRole(role)} message.`);
    }
  }
}

/**
 * Turn order: optional system first, then user; user -> assistant; assistant -> user, or -> tool
 * when it made tool calls; tool -> tool while calls are unanswered, then -> assistant.
 */
function checkTurn(msg: Json, role: Role, i: number, p: string, walk: Walk): void {
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

function answerCall(msg: Json, p: string, walk: Walk): void {
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
  const id = get(msg, 'tool_call_id');
  if (typeof id !== 'string' || id === '') fail(expected(`${p}.tool_call_id`, 'a non-empty string', id));
  if (block.pending.delete(id)) {
    block.answered.set(id, p);
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

function checkContent(msg: Json, p: string, role: Role, rules: ContentRules, ctx: Context): void {
  const content = get(msg, 'content');
  // The common case first, with nothing built for it: a non-empty string from anyone but a tool.
  if (typeof content === 'string' && content !== '' && role !== 'tool') return;
  const path = `${p}.content`;
  if (role === 'tool') {
    // A tool may legitimately return nothing, so only the type is checked.
    if (typeof content !== 'string') fail(expected(path, 'a string', content));
    return;
  }
  // An assistant turn that only calls tools has nothing to say; every other turn must say something.
  const mayBeEmpty = role === 'assistant' && has(msg, 'tool_calls');
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
  ctx.flags.add('is_multimodal');
}

// Inline images must say they are images and carry a payload; remote ones must be fetchable over http(s).
const IMAGE_URL = /^(data:image\/[a-z0-9.+-]+;base64,.|https?:\/\/\S)/i;

function checkImageUrl(url: unknown, path: string): void {
  const what = 'a data:image/...;base64, URL or an http(s) URL';
  if (typeof url !== 'string' || url === '') fail(expected(path, what, url));
  if (!IMAGE_URL.test(url)) fail(expected(path, what, url, show));
}

function checkMessageWeight(msg: Json, p: string, ctx: Context): void {
  if (!has(msg, 'weight')) return;
  // Message weights are a loss mask, so fractions are meaningless: only 0 (masked) or 1 (trained).
  if (msg.weight !== 0 && msg.weight !== 1) fail(expected(`${p}.weight`, 'the integer 0 or 1', msg.weight, show));
  ctx.flags.add('has_message_weights');
}

function checkReasoning(msg: Json, p: string, ctx: Context): void {
  const reasoning = has(msg, 'reasoning');
  const legacy = has(msg, 'reasoning_content');
  if (!reasoning && !legacy) return;
  if (reasoning && legacy) {
    fail(`${p}: has both reasoning and reasoning_content; keep one (reasoning_content is the legacy name).`);
  }
  const key = reasoning ? 'reasoning' : 'reasoning_content';
  if (typeof msg[key] !== 'string') fail(expected(`${p}.${key}`, 'a string', msg[key]));
  ctx.flags.add('has_reasoning');
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
  if (names.size > 0) ctx.flags.add('has_tools');
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
    const earlier = ctx.callIds.get(id);
    if (earlier !== undefined) {
      fail(`${p}.id: ${quote(id)} is already used by ${earlier}; call ids must be unique within a record.`);
    }
    ctx.callIds.set(id, p);
    calls.set(id, p);
  }
  ctx.flags.add('has_tools');
  if (value.length > 1) ctx.flags.add('has_parallel_tool_calls');
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
    ctx.callIds = new Map(inputIds);
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
  rejectUnknownKeys(msg, p, OUTPUT_KEYS, 'an output message');
  if (get(msg, 'role') !== 'assistant') fail(expected(`${p}.role`, '"assistant"', get(msg, 'role'), show));
  checkContent(msg, p, 'assistant', { allowParts: false }, ctx);
  // No tool results follow an output: the pair is compared on the call itself.
  if (has(msg, 'tool_calls')) checkToolCalls(msg.tool_calls, `${p}.tool_calls`, ctx);
  checkReasoning(msg, p, ctx);
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
