/**
 * A judge for evaluation tests: an OpenAI-compatible chat server on loopback whose verdicts follow a
 * rule over what it is sent, so a test knows each row's verdict (and so the counts) from its file.
 */
import { createServer, type Server } from 'node:http';

export const JUDGE_TOKEN = 'sk-judge-test-token-7f3a';

/** What the judge was sent, one entry per call. */
export interface JudgeCall {
  authorization: string | undefined;
  system: string;
  user: string;
}

/**
 * The judge's rule. classify: the label its system prompt names after `MARK:` (`junk` gets a
 * sentence with no verdict). score: the number after `expected=`. compare: the response that
 * contains WIN, as A or B by where it stands; Tie when neither does.
 */
function verdictFor(system: string, user: string): string {
  if (system.includes('{"winner"')) {
    const [, a = '', b = ''] = /Response A:\n([\s\S]*)\n\nResponse B:\n([\s\S]*)$/.exec(user) ?? [];
    return JSON.stringify({ winner: a.includes('WIN') ? 'A' : b.includes('WIN') ? 'B' : 'Tie' });
  }
  const expected = /expected=(\d+)/.exec(system);
  if (expected) return `{"score": ${expected[1]}}`;
  const mark = /MARK:(\w+)/.exec(system)?.[1];
  return mark === 'junk' ? 'This answer seems fine to me.' : `\`\`\`json\n{"label": "${mark}"}\n\`\`\``;
}

/**
 * Starts the judge. `answerWhen`, when given, is awaited before each answer (with the call's index):
 * a judge that holds its answers keeps an evaluation mid-way for as long as a test needs.
 */
export function startRuleJudge(calls: JudgeCall[], answerWhen?: (callIndex: number) => Promise<void>): Promise<Server> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const { messages } = JSON.parse(body) as { messages: { role: string; content: string }[] };
      const system = messages.find((m) => m.role === 'system')?.content ?? '';
      const user = messages.find((m) => m.role === 'user')?.content ?? '';
      const index = calls.push({ authorization: req.headers.authorization, system, user }) - 1;
      const answer = () => {
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            choices: [{ index: 0, message: { role: 'assistant', content: verdictFor(system, user) } }],
          }),
        );
      };
      if (answerWhen) void answerWhen(index).then(answer);
      else answer();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}
