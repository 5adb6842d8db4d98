/** Small datasets tests write inline. */
export const jsonl = (...records: unknown[]) => records.map((r) => JSON.stringify(r)).join('\n') + '\n';

export const chat = (question: string, answer: string) => ({
  messages: [
    { role: 'user', content: question },
    { role: 'assistant', content: answer },
  ],
});
