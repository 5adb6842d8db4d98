/**
 * The per-record dataset rules on their own: parsed values in, a reason or
 * null out. No files, no database, no Temporal.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  checkCsvHeader,
  checkCsvRow,
  checkRecord,
  initialRecordsState,
  type DatasetPurpose,
  type RecordsState,
} from '../../datasets/records';

const sys = (content = 'You are terse.') => ({ role: 'system', content });
const user = (content: unknown = 'Hi') => ({ role: 'user', content });
const assistant = (content: unknown = 'Hello.') => ({ role: 'assistant', content });
const call = (id: string, name = 'get_weather', args = '{"city":"Paris"}') => ({
  id,
  type: 'function',
  function: { name, arguments: args },
});
const callsMsg = (...calls: unknown[]) => ({ role: 'assistant', content: null, tool_calls: calls });
const toolResult = (id: string, content = '{"temp":21}') => ({ role: 'tool', tool_call_id: id, content });
const weatherTool = {
  type: 'function',
  function: { name: 'get_weather', description: 'Weather by city', parameters: { type: 'object' } },
};
const chat = (...messages: unknown[]) => ({ messages });
const pref = (input: unknown[], preferred: unknown = 'Yes.', rejected: unknown = 'No.') => ({
  input: { messages: input },
  preferred_output: [assistant(preferred)],
  non_preferred_output: [assistant(rejected)],
});

/** Checks one record against a fresh state (or the one given) and returns the reason. */
function check(value: unknown, purpose: DatasetPurpose = 'fine-tune', state = initialRecordsState()) {
  return checkRecord(value, purpose, state);
}

/** Checks a valid record and returns the state it produced. */
function accept(value: unknown, purpose: DatasetPurpose = 'fine-tune'): RecordsState {
  const state = initialRecordsState();
  assert.equal(checkRecord(value, purpose, state), null);
  return state;
}

describe('valid records', () => {
  test('GENERAL', () => {
    const state = accept({ text: 'The quick brown fox.' });
    assert.deepEqual(state, { ...initialRecordsState(), nlines: 1, format: 'GENERAL' });
  });

  test('INSTRUCTION, empty prompt allowed', () => {
    assert.equal(accept({ prompt: '', completion: 'Paris.' }).format, 'INSTRUCTION');
  });

  test('CONVERSATION with system, several turns and message weights', () => {
    const state = accept(
      chat(sys(), user(), { ...assistant(), weight: 0 }, user('More?'), { ...assistant(), weight: 1 }),
    );
    assert.equal(state.format, 'CONVERSATION');
    assert.equal(state.has_message_weights, true);
    assert.equal(state.has_sample_weights, false);
  });

  test('sample weight sets has_sample_weights', () => {
    const state = accept({ text: 'x', weight: 0.25 });
    assert.equal(state.has_sample_weights, true);
    assert.equal(accept({ text: 'x', weight: 0 }).has_sample_weights, true);
  });

  test('two tool calls answered in any order set has_tools and has_parallel_tool_calls', () => {
    const state = accept({
      messages: [
        user('Weather in Paris and Rome?'),
        callsMsg(call('c1'), call('c2', 'get_weather', '{"city":"Rome"}')),
        toolResult('c2'),
        toolResult('c1'),
        assistant('Both are warm.'),
      ],
      tools: [weatherTool],
    });
    assert.equal(state.has_tools, true);
    assert.equal(state.has_parallel_tool_calls, true);
  });

  test('one tool call sets has_tools only', () => {
    const state = accept(chat(user(), callsMsg(call('c1')), toolResult('c1'), assistant()));
    assert.equal(state.has_tools, true);
    assert.equal(state.has_parallel_tool_calls, false);
  });

  test('image part sets is_multimodal (data URL and https)', () => {
    const state = accept(
      chat(
        user([
          { type: 'text', text: 'What is this?' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
          { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg', detail: 'low' } },
        ]),
        assistant('A cat.'),
      ),
    );
    assert.equal(state.is_multimodal, true);
  });

  test('reasoning and legacy reasoning_content set has_reasoning', () => {
    assert.equal(accept(chat(user(), { ...assistant(), reasoning: 'Greet back.' })).has_reasoning, true);
    assert.equal(accept(chat(user(), { ...assistant(), reasoning_content: 'Greet.' })).has_reasoning, true);
  });

  test('PREFERENCE_OPENAI, including a tool-call output and reasoning', () => {
    const state = accept({
      input: { messages: [sys(), user('Weather in Paris?')], tools: [weatherTool] },
      preferred_output: [{ role: 'assistant', content: null, tool_calls: [call('c1')], reasoning: 'Need data.' }],
      non_preferred_output: [assistant('No idea.')],
    });
    assert.equal(state.format, 'PREFERENCE_OPENAI');
    assert.equal(state.has_tools, true);
    assert.equal(state.has_reasoning, true);
  });

  test('PREFERENCE_OPENAI input may end with tool results, tools may be top level', () => {
    const state = accept({
      input: { messages: [user('Weather?'), callsMsg(call('c1')), toolResult('c1')] },
      tools: [weatherTool],
      preferred_output: [assistant('21 degrees.')],
      non_preferred_output: [assistant('Cold.')],
    });
    assert.equal(state.format, 'PREFERENCE_OPENAI');
  });

  test('eval accepts any object and keeps format null', () => {
    const state = initialRecordsState();
    assert.equal(checkRecord({ question: 'q', answer: 'a' }, 'eval', state), null);
    assert.equal(checkRecord({}, 'eval', state), null);
    assert.equal(checkRecord({ text: 'looks like GENERAL' }, 'eval', state), null);
    assert.deepEqual(state, { ...initialRecordsState(), nlines: 3 });
  });

  test('the state is plain JSON and round-trips (heartbeat restore)', () => {
    const state = accept(chat(user(), callsMsg(call('a'), call('b')), toolResult('a'), toolResult('b'), assistant()));
    const restored = JSON.parse(JSON.stringify(state)) as RecordsState;
    assert.deepEqual(restored, state);
    assert.equal(checkRecord(chat(user(), assistant()), 'fine-tune', restored), null);
    assert.equal(restored.nlines, 2);
  });
});

// [name, record, expected reason pattern, purpose]
const invalid: [string, unknown, RegExp, DatasetPurpose?][] = [
  // Record shape and format detection
  ['array record', [1, 2], /expected a JSON object, found array/],
  ['string record', 'hello', /expected a JSON object, found string/],
  ['null record', null, /expected a JSON object, found null/],
  ['number record', 42, /expected a JSON object, found number/],
  ['eval rejects an array', [{ a: 1 }], /expected a JSON object, found array/, 'eval'],
  [
    'no format keys',
    { question: 'q', answer: 'a' },
    /keys "question", "answer".*no dataset format.*"text" \(GENERAL\).*"messages" \(CONVERSATION\).*"prompt" \+ "completion" \(INSTRUCTION\).*"input" \+ "preferred_output" \+ "non_preferred_output" \(PREFERENCE_OPENAI\)/,
  ],
  ['empty object', {}, /found no keys/],
  ['half an instruction', { prompt: 'q' }, /missing key "completion" for the INSTRUCTION format/],
  [
    'keys of two formats',
    { text: 'x', messages: [] },
    /keys of "text" \(GENERAL\) and "messages" \(CONVERSATION\); a record must use exactly one format/,
  ],
  [
    'extra top-level key',
    { text: 'x', foo: 1 },
    /unexpected key "foo"; a GENERAL record allows "text" and optionally "weight"/,
  ],
  [
    'inherited key names are not format keys',
    JSON.parse('{"constructor": 1}'),
    /keys "constructor".*no dataset format/,
  ],
  // Sample weight
  ['negative sample weight', { text: 'x', weight: -1 }, /^weight: expected a number >= 0, found -1/],
  ['string sample weight', { text: 'x', weight: 'NaN' }, /^weight: expected a finite number >= 0, found string/],
  // GENERAL and INSTRUCTION
  ['empty text', { text: '' }, /^text: expected a non-empty string, found an empty string/],
  ['prompt not a string', { prompt: 5, completion: 'a' }, /^prompt: expected a string, found number/],
  [
    'empty completion',
    { prompt: 'q', completion: '' },
    /^completion: expected a non-empty string, found an empty string/,
  ],
  // Message shape
  ['messages not an array', { messages: 'hi' }, /^messages: expected a non-empty array of messages, found string/],
  ['empty messages array', chat(), /^messages: expected a non-empty array of messages, found an empty array/],
  ['message not an object', chat('hi'), /^messages\[0\]: expected a message object, found string/],
  [
    'bad role',
    chat(user(), { role: 'bot', content: 'x' }),
    /messages\[1\]\.role: expected one of system, user, assistant, tool, found "bot"/,
  ],
  [
    'missing role',
    chat({ content: 'x' }),
    /messages\[0\]\.role is missing; expected one of system, user, assistant, tool/,
  ],
  [
    'unknown message key',
    chat(user(), { ...assistant(), score: 1 }),
    /messages\[1\]: unexpected key "score"; a message allows only role, content/,
  ],
  // Turn order
  [
    'system not first',
    chat(user(), assistant(), sys()),
    /messages\[2\]\.role: a system message is only allowed as the first message/,
  ],
  [
    'first non-system not user',
    chat(sys(), assistant()),
    /messages\[1\]\.role: expected "user" as the first message after the optional system message, found "assistant"/,
  ],
  [
    'double user',
    chat(user(), user(), assistant()),
    /messages\[1\]\.role: two user messages in a row \(messages\[0\] and messages\[1\]\)/,
  ],
  ['double assistant', chat(user(), assistant(), assistant()), /messages\[2\]\.role: two assistant messages in a row/],
  [
    'system only',
    { input: { messages: [sys()] }, preferred_output: [assistant('a')], non_preferred_output: [assistant('b')] },
    /input\.messages: expected a user message after the system message, found none/,
  ],
  // Content
  [
    'missing content on user',
    chat({ role: 'user' }, assistant()),
    /messages\[0\]\.content is missing; expected a non-empty string or an array of content parts/,
  ],
  [
    'non-string content on user',
    chat(user(7), assistant()),
    /messages\[0\]\.content: expected a non-empty string or an array of content parts, found number/,
  ],
  ['empty user content', chat(user(''), assistant()), /messages\[0\]\.content: expected .*found an empty string/],
  [
    'empty assistant content without tool_calls',
    chat(user(), assistant('')),
    /messages\[1\]\.content: .*only with tool_calls.*found an empty string/,
  ],
  ['null assistant content without tool_calls', chat(user(), assistant(null)), /messages\[1\]\.content: .*found null/],
  [
    'bad content part type',
    chat(user([{ type: 'audio', audio: {} }]), assistant()),
    /messages\[0\]\.content\[0\]\.type: expected "text" or "image_url", found "audio"/,
  ],
  [
    'image_url without url',
    chat(user([{ type: 'image_url', image_url: {} }]), assistant()),
    /messages\[0\]\.content\[0\]\.image_url\.url is missing; expected a data:image\/\.\.\.;base64, URL or an http\(s\) URL/,
  ],
  [
    'image url of the wrong scheme',
    chat(user([{ type: 'image_url', image_url: { url: 'ftp://x/y.png' } }]), assistant()),
    /image_url\.url: expected a data:image.*found "ftp:\/\/x\/y\.png"/,
  ],
  [
    'text part without text',
    chat(user([{ type: 'text' }]), assistant()),
    /messages\[0\]\.content\[0\]\.text is missing; expected a string/,
  ],
  [
    'non-string tool content',
    chat(user(), callsMsg(call('c1')), toolResult('c1', { t: 1 } as never), assistant()),
    /messages\[2\]\.content: expected a string, found object/,
  ],
  // Message weights
  [
    'message weight 2',
    chat(user(), { ...assistant(), weight: 2 }),
    /messages\[1\]\.weight: expected the integer 0 or 1, found 2/,
  ],
  [
    'message weight 0.5',
    chat(user(), { ...assistant(), weight: 0.5 }),
    /messages\[1\]\.weight: expected the integer 0 or 1, found 0\.5/,
  ],
  [
    'message weight true',
    chat(user(), { ...assistant(), weight: true }),
    /messages\[1\]\.weight: expected the integer 0 or 1, found true/,
  ],
  // Tool calls
  [
    'tool_calls on user',
    chat({ ...user(), tool_calls: [call('c1')] }, assistant()),
    /messages\[0\]\.tool_calls: only assistant messages may have tool_calls, found it on a user message/,
  ],
  [
    'tool_call_id on assistant',
    chat(user(), { ...assistant(), tool_call_id: 'c1' }),
    /messages\[1\]\.tool_call_id: only tool messages may have tool_call_id, found it on an assistant message/,
  ],
  [
    'empty tool_calls',
    chat(user(), { role: 'assistant', content: null, tool_calls: [] }),
    /messages\[1\]\.tool_calls: expected a non-empty array of tool calls, found an empty array/,
  ],
  [
    'tool call missing id',
    chat(user(), callsMsg({ type: 'function', function: { name: 'f', arguments: '{}' } })),
    /messages\[1\]\.tool_calls\[0\]\.id is missing; expected a non-empty string/,
  ],
  [
    'tool call type not function',
    chat(user(), callsMsg({ ...call('c1'), type: 'code' })),
    /messages\[1\]\.tool_calls\[0\]\.type: expected "function", found "code"/,
  ],
  [
    'arguments not JSON',
    chat(user(), callsMsg(call('c1', 'f', '{city: Paris')), toolResult('c1'), assistant()),
    /messages\[1\]\.tool_calls\[0\]\.function\.arguments: expected a string holding JSON, found text that does not parse: "\{city: Paris"/,
  ],
  [
    'arguments as an object',
    chat(user(), callsMsg({ ...call('c1'), function: { name: 'f', arguments: {} } })),
    /function\.arguments: expected a string holding JSON, found object/,
  ],
  [
    'duplicate call ids in one message',
    chat(user(), callsMsg(call('c1'), call('c1'))),
    /messages\[1\]\.tool_calls\[1\]\.id: "c1" is already used by messages\[1\]\.tool_calls\[0\]/,
  ],
  [
    'duplicate call ids across messages',
    chat(user(), callsMsg(call('c1')), toolResult('c1'), callsMsg(call('c1')), toolResult('c1'), assistant()),
    /messages\[3\]\.tool_calls\[0\]\.id: "c1" is already used by messages\[1\]\.tool_calls\[0\]; call ids must be unique within a record/,
  ],
  [
    'tool message with unknown tool_call_id',
    chat(user(), callsMsg(call('c1')), toolResult('c9'), assistant()),
    /messages\[2\]\.tool_call_id: "c9" matches no call of messages\[1\]; its unanswered calls are "c1"/,
  ],
  [
    'tool call answered twice',
    chat(user(), callsMsg(call('c1'), call('c2')), toolResult('c1'), toolResult('c1'), assistant()),
    /messages\[3\]\.tool_call_id: call "c1" is already answered by messages\[2\]/,
  ],
  [
    'unanswered call before the next assistant message',
    chat(user(), callsMsg(call('c1'), call('c2')), toolResult('c1'), assistant()),
    /messages\[1\]\.tool_calls\[1\] \(id "c2"\) is never answered; expected a tool message with that tool_call_id before messages\[3\]/,
  ],
  [
    'unanswered call at the end',
    chat(user(), assistant(), user(), callsMsg(call('c1'))),
    /messages\[3\]\.tool_calls\[0\] \(id "c1"\) is never answered.*before the end of the conversation/,
  ],
  [
    'tool message after a user message',
    chat(user(), toolResult('c1'), assistant()),
    /messages\[1\]\.role: a tool message must follow an assistant message with tool_calls, found it after a user message/,
  ],
  [
    'tool message after a plain assistant message',
    chat(user(), assistant(), toolResult('c1')),
    /messages\[2\]\.role: .*found it after an assistant message without tool_calls/,
  ],
  [
    'user right after tool results',
    chat(user(), callsMsg(call('c1')), toolResult('c1'), user()),
    /messages\[3\]\.role: expected "assistant" after the tool results of messages\[1\], found "user"/,
  ],
  [
    'tool message without tool_call_id',
    chat(user(), callsMsg(call('c1')), { role: 'tool', content: 'x' }, assistant()),
    /messages\[2\]\.tool_call_id is missing; expected a non-empty string/,
  ],
  [
    'tool name not in tools',
    { messages: [user(), callsMsg(call('c1', 'get_wether')), toolResult('c1'), assistant()], tools: [weatherTool] },
    /messages\[1\]\.tool_calls\[0\]\.function\.name: "get_wether" is not a function declared in tools \(declared: "get_weather"\)/,
  ],
  [
    'tool definition without name',
    { messages: [user(), assistant()], tools: [{ type: 'function', function: {} }] },
    /^tools\[0\]\.function\.name is missing; expected a non-empty string/,
  ],
  [
    'tools not an array',
    { messages: [user(), assistant()], tools: {} },
    /^tools: expected an array of tool definitions, found object/,
  ],
  [
    'tool declared twice',
    { messages: [user(), assistant()], tools: [weatherTool, weatherTool] },
    /^tools\[1\]\.function\.name: "get_weather" is already declared by tools\[0\]/,
  ],
  // Reasoning
  [
    'reasoning on user',
    chat({ ...user(), reasoning: 'hmm' }, assistant()),
    /messages\[0\]\.reasoning: only assistant messages may have reasoning, found it on a user message/,
  ],
  [
    'both reasoning and reasoning_content',
    chat(user(), { ...assistant(), reasoning: 'a', reasoning_content: 'b' }),
    /messages\[1\]: has both reasoning and reasoning_content/,
  ],
  [
    'reasoning not a string',
    chat(user(), { ...assistant(), reasoning: ['a'] }),
    /messages\[1\]\.reasoning: expected a string, found array/,
  ],
  // Ending
  ['no assistant message', chat(sys(), user()), /^messages: expected at least one assistant message, found none/],
  [
    'ends with user',
    chat(user(), assistant(), user()),
    /messages\[2\]\.role: expected the last message to be "assistant", found "user"; a trailing user turn trains nothing/,
  ],
  [
    'ends with tool results',
    chat(user(), callsMsg(call('c1')), toolResult('c1')),
    /messages\[2\]\.role: expected the last message to be "assistant", found "tool"/,
  ],
  // Preference
  [
    'preference input ending with assistant',
    pref([user(), assistant()]),
    /input\.messages\[1\]\.role: the input must not end with an assistant message/,
  ],
  [
    'preference input not an object',
    { input: [user()], preferred_output: [assistant('a')], non_preferred_output: [assistant('b')] },
    /^input: expected an object with messages, found array/,
  ],
  [
    'preference input without messages',
    { input: {}, preferred_output: [assistant('a')], non_preferred_output: [assistant('b')] },
    /^input\.messages is missing; expected a non-empty array of messages/,
  ],
  [
    'preference input with extra key',
    {
      input: { messages: [user()], meta: 1 },
      preferred_output: [assistant('a')],
      non_preferred_output: [assistant('b')],
    },
    /^input: unexpected key "meta"; input allows only messages, tools/,
  ],
  [
    'preferred_output with two messages',
    { ...pref([user()]), preferred_output: [assistant('a'), assistant('b')] },
    /^preferred_output: expected an array with exactly one assistant message, found 2 messages/,
  ],
  [
    'non_preferred_output role user',
    { ...pref([user()]), non_preferred_output: [user('b')] },
    /^non_preferred_output\[0\]\.role: expected "assistant", found "user"/,
  ],
  [
    'empty preferred content',
    pref([user()], ''),
    /^preferred_output\[0\]\.content: expected a non-empty string.*found an empty string/,
  ],
  [
    'identical outputs',
    pref([user()], 'Same.', 'Same.'),
    /preferred_output and non_preferred_output are identical; identical outputs teach nothing/,
  ],
  [
    'identical outputs up to key order',
    { ...pref([user()]), non_preferred_output: [{ content: 'Yes.', role: 'assistant' }] },
    /identical outputs teach nothing/,
  ],
  [
    'tools both top level and in input',
    { ...pref([user()]), input: { messages: [user()], tools: [weatherTool] }, tools: [weatherTool] },
    /tools is given both at the top level and in input/,
  ],
  [
    'output tool call name not declared',
    {
      input: { messages: [user()], tools: [weatherTool] },
      preferred_output: [callsMsg(call('c1', 'search'))],
      non_preferred_output: [assistant('b')],
    },
    /^preferred_output\[0\]\.tool_calls\[0\]\.function\.name: "search" is not a function declared in tools/,
  ],
  [
    'weight inside an output',
    { ...pref([user()]), preferred_output: [{ ...assistant('a'), weight: 1 }] },
    /^preferred_output\[0\]: unexpected key "weight"; an output message allows only/,
  ],
];

describe('invalid records', () => {
  for (const [name, record, pattern, purpose] of invalid) {
    test(name, () => {
      const reason = check(record, purpose ?? 'fine-tune');
      assert.ok(reason !== null, 'expected a reason, the record was accepted');
      assert.match(reason, pattern);
    });
  }

  test('every reason is short: one or two sentences, no line breaks', () => {
    for (const [, record, , purpose] of invalid) {
      const reason = check(record, purpose ?? 'fine-tune') ?? '';
      assert.doesNotMatch(reason, /\n/);
      assert.ok(reason.length < 400, reason);
      assert.doesNotMatch(reason, /^Line \d/, 'the caller adds the line prefix');
    }
  });

  test('huge values are truncated in reasons', () => {
    const huge = 'x'.repeat(100_000);
    const reasons = [
      check(chat(user(), { role: huge, content: 'a' })),
      check({ text: 'a', [huge]: 1 }),
      check(chat(user(), callsMsg(call('c1', 'f', `{${huge}`)))),
    ];
    for (const reason of reasons) {
      assert.ok(reason !== null && reason.length < 300, `reason of ${reason?.length} characters`);
      assert.match(reason, /\.\.\."/);
    }
  });
});

describe('state across records', () => {
  test('mixed formats: first GENERAL then CONVERSATION', () => {
    const state = initialRecordsState();
    assert.equal(checkRecord({ text: 'a' }, 'fine-tune', state), null);
    const reason = checkRecord(chat(user(), assistant()), 'fine-tune', state);
    assert.match(reason ?? '', /record is CONVERSATION but the first record is GENERAL/);
  });

  test('an invalid record leaves the state unchanged', () => {
    const state = initialRecordsState();
    assert.equal(checkRecord(chat(user(), { ...assistant(), weight: 1 }), 'fine-tune', state), null);
    const before = structuredClone(state);
    // This record would set several flags before failing at its very end.
    const bad = {
      messages: [
        user([{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }]),
        { ...callsMsg(call('c1'), call('c2')), reasoning: 'r' },
        toolResult('c1'),
        toolResult('c2'),
        assistant(),
        user('trailing'),
      ],
      weight: 2,
    };
    assert.match(checkRecord(bad, 'fine-tune', state) ?? '', /trailing user turn/);
    assert.deepEqual(state, before);
  });

  test('the first record fixes the format only when valid', () => {
    const state = initialRecordsState();
    assert.notEqual(checkRecord({ text: '' }, 'fine-tune', state), null);
    assert.equal(state.format, null);
    assert.equal(checkRecord(chat(user(), assistant()), 'fine-tune', state), null);
    assert.equal(state.format, 'CONVERSATION');
  });

  test('nlines counts only valid records', () => {
    const state = initialRecordsState();
    const records = [{ text: 'a' }, { text: 5 }, [], { text: 'b' }, { text: 'c', extra: 1 }, { text: 'd', weight: 1 }];
    const reasons = records.map((r) => checkRecord(r, 'fine-tune', state));
    assert.equal(reasons.filter((r) => r === null).length, 3);
    assert.equal(state.nlines, 3);
    assert.equal(state.has_sample_weights, true);
  });

  test('eval never sets a format, even after fine-tune-looking records', () => {
    const state = initialRecordsState();
    assert.equal(checkRecord(chat(user(), assistant()), 'eval', state), null);
    assert.equal(checkRecord({ text: 1 }, 'eval', state), null);
    assert.equal(checkRecord('nope', 'eval', state), 'expected a JSON object, found string.');
    assert.deepEqual(state, { ...initialRecordsState(), nlines: 2 });
  });

  test('an unknown purpose is a caller bug and throws', () => {
    assert.throws(() => checkRecord({}, 'train' as DatasetPurpose, initialRecordsState()), /unknown dataset purpose/);
  });
});

describe('CSV (eval)', () => {
  test('a good header and rows pass', () => {
    assert.equal(checkCsvHeader(['question', 'answer']), null);
    assert.equal(checkCsvRow(['question', 'answer'], ['2+2?', '4']), null);
    assert.equal(checkCsvRow(['question', 'answer'], ['2+2?', '']), null, 'empty cells are allowed');
  });

  test('empty header', () => {
    assert.match(checkCsvHeader([]) ?? '', /CSV header is empty/);
    assert.match(checkCsvHeader(['', ' ']) ?? '', /CSV header is empty/);
  });

  test('blank column name', () => {
    assert.match(checkCsvHeader(['question', ' ', 'answer']) ?? '', /column 2 is blank/);
  });

  test('duplicate column name, compared trimmed', () => {
    assert.match(checkCsvHeader(['question', 'answer', ' question']) ?? '', /column 3 "question" repeats column 1/);
  });

  test('row column count mismatch', () => {
    assert.equal(checkCsvRow(['a', 'b', 'c'], ['1', '2']), 'expected 3 columns as in the header, found 2.');
    assert.match(checkCsvRow(['a'], ['1', '2']) ?? '', /expected 1 column as in the header, found 2/);
  });
});
