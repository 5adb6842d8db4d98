/**
 * Reads the header of a safetensors file: 8 bytes of little-endian length,
 * then a JSON table of tensor names, dtypes, shapes and byte offsets.
 */
import { openSync, readSync, closeSync } from 'node:fs';

export interface TensorInfo {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

export function readSafetensorsHeader(file: string): Record<string, TensorInfo> {
  const fd = openSync(file, 'r');
  try {
    const len = Buffer.alloc(8);
    readSync(fd, len, 0, 8, 0);
    const size = Number(len.readBigUInt64LE(0));
    if (size <= 0 || size > 100 * 1024 * 1024) throw new Error(`${file}: implausible safetensors header size ${size}`);
    const header = Buffer.alloc(size);
    readSync(fd, header, 0, size, 8);
    const table = JSON.parse(header.toString('utf8')) as Record<string, TensorInfo>;
    delete (table as Record<string, unknown>).__metadata__;
    return table;
  } finally {
    closeSync(fd);
  }
}
