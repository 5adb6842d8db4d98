/**
 * Tokenizers of the fine-tunable base models. The reference model's is
 * byte-level: every UTF-8 byte is a token (4 + byte), with four specials, so
 * any text round-trips exactly. Larger base models bring their own tokenizer
 * behind the same interface.
 */
export interface Tokenizer {
  readonly name: string;
  readonly vocabSize: number;
  readonly pad: number;
  readonly bos: number;
  readonly eos: number;
  encode(text: string): number[];
  /** A readable form of one token, for previews. */
  tokenString(id: number): string;
}

const SPECIALS = ['<pad>', '<s>', '</s>', '<sep>'];

export class ByteTokenizer implements Tokenizer {
  readonly name = 'byte-level';
  readonly vocabSize = 256 + SPECIALS.length;
  readonly pad = 0;
  readonly bos = 1;
  readonly eos = 2;

  encode(text: string): number[] {
    const bytes = Buffer.from(text, 'utf8');
    const ids = new Array<number>(bytes.length);
    for (let i = 0; i < bytes.length; i++) ids[i] = SPECIALS.length + bytes[i];
    return ids;
  }

  tokenString(id: number): string {
    if (id < SPECIALS.length) return SPECIALS[id];
    const byte = id - SPECIALS.length;
    // Printable ASCII as itself, everything else as a byte escape.
    return byte >= 0x20 && byte < 0x7f
      ? String.fromCharCode(byte)
      : `<0x${byte.toString(16).toUpperCase().padStart(2, '0')}>`;
  }
}
