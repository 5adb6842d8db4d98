-- What a job's own tokenization counted, one pass over each file:
-- {"train": {"samples": n, "tokens": n}, "eval": {...} | null}. The charge at
-- training start is computed from it, exactly (finetune/estimate.ts billedTokens).
ALTER TABLE fine_tunes ADD COLUMN tokenized_counts jsonb;
