/** `gantry files`: check (locally, with the server's rules), upload, list, retrieve, download, delete. */
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { FILE_PURPOSES, type FilePurpose, type ValidationReport } from '../../shared/files';
import { context, oneOf, type Context } from '../context';
import { CliError, EXIT, usageError } from '../errors';
import { checkLocalFile, localFile, type LocalFile } from '../local-check';
import { bytes, details, print, table, time, yesNo, type Cell } from '../output';
import { saveResponse, uploadFile } from '../transfer';

type FileObject = Record<string, any>;

const PENDING = ['PENDING', 'QUEUED', 'RUNNING'];

/**
 * Where a download goes when no --output is given. The name comes from the server, and anyone in
 * the project chose it: it must not land on a dotfile (`.bashrc`, `.profile`) nor replace a file
 * that is there. Leading dots and control characters are dropped; an empty name becomes the id.
 */
export function defaultDownloadName(serverName: string, id: string): string {
  const name = path
    .basename(serverName)
    .replace(/[\x00-\x1f\x7f]/g, '')
    .replace(/^\.+/, '');
  const dest = name || id;
  if (existsSync(dest)) {
    throw new CliError(`${dest} exists here; choose where to write the file with --output.`, EXIT.USAGE);
  }
  return dest;
}

function reportRows(r: ValidationReport | undefined | null): [string, Cell][] {
  if (!r) return [];
  return [
    ['Valid', yesNo(r.valid)],
    ['Format', r.dataset_format],
    ['Lines', r.nlines],
    ['Sample weights', yesNo(r.dataset_has_sample_weights)],
    ['Message weights', yesNo(r.dataset_has_message_weights)],
    ['Multimodal', yesNo(r.dataset_is_multimodal)],
    ['Tools', yesNo(r.dataset_has_tools)],
    ['Parallel tool calls', yesNo(r.dataset_has_parallel_tool_calls)],
    ['Reasoning', yesNo(r.dataset_has_reasoning)],
    ...(r.error ? ([['Error', r.error]] as [string, Cell][]) : []),
  ];
}

export function fileDetails(f: FileObject): string {
  return details([
    ['ID', f.id],
    ['File name', f.filename],
    ['Purpose', f.purpose],
    ['Type', f.FileType],
    ['Size', `${bytes(f.bytes)} (${f.bytes} bytes)`],
    ['Created', time(f.created_at)],
    ['Status', f.processing_status],
    ...(f.processing_note ? ([['Note', f.processing_note]] as [string, Cell][]) : []),
    ...reportRows(f.validation_report),
  ]);
}

/** Runs the local check; a file that fails it is a usage error (exit code 2) with the server's reason. */
export async function checkOrFail(file: LocalFile, purpose: FilePurpose): Promise<ValidationReport | null> {
  const report = await checkLocalFile(file, purpose);
  if (report && !report.valid) {
    throw usageError(`${file.path} failed the file check: ${report.error}`);
  }
  return report;
}

/** Polls a file until its validation has finished; a file that fails it is an error with the server's reason. */
export async function waitForValidation(ctx: Context, id: string, timeoutSeconds = 3600): Promise<FileObject> {
  const deadline = Date.now() + timeoutSeconds * 1000;
  for (;;) {
    const f = await ctx.client.get<FileObject>(`/v1/files/${encodeURIComponent(id)}`);
    if (!PENDING.includes(f.processing_status)) {
      if (f.processing_status !== 'COMPLETED') {
        throw new CliError(
          `File ${id} is ${f.processing_status}: ${f.validation_report?.error ?? f.processing_note ?? 'validation did not complete'}`,
          EXIT.API,
        );
      }
      return f;
    }
    if (Date.now() > deadline) throw new CliError(`File ${id} is still ${f.processing_status}.`, EXIT.API);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** A file argument that names a local file (an existing path, or one that looks like a path) rather than a file id. */
export const isLocalPath = (value: string) => existsSync(value) || /[\\/]|\.(jsonl|parquet|csv)$/i.test(value);

/**
 * A file argument of a fine-tuning command: a file id, or a local path that is
 * checked, uploaded and validated first (its new id is returned).
 */
export async function fileIdOrUpload(ctx: Context, value: string, what: string): Promise<string> {
  if (!isLocalPath(value)) return value;
  const file = await localFile(value);
  await checkOrFail(file, 'fine-tune');
  ctx.out.note(`Uploading ${what} ${value}...`);
  const uploaded = await uploadFile(ctx.client, file, 'fine-tune');
  ctx.out.note(`Uploaded ${value} as ${uploaded.id}; waiting for validation...`);
  await waitForValidation(ctx, uploaded.id);
  return uploaded.id;
}

const purposeOpt = oneOf(...FILE_PURPOSES);

export function addFileCommands(program: Command) {
  const files = program.command('files').description('Upload, check and manage dataset files');

  files
    .command('check')
    .description("Check a local file with the server's validation rules, without uploading it")
    .argument('<file>', 'path of the file')
    .option('--purpose <purpose>', `${FILE_PURPOSES.join(', ')}`, purposeOpt, 'fine-tune')
    .option('--file-type <type>', 'jsonl, csv or parquet (default: from the extension)')
    .action(async (filePath: string, opts: { purpose: FilePurpose; fileType?: string }, cmd: Command) => {
      const { out } = context(cmd);
      const file = await localFile(filePath, { fileType: opts.fileType });
      const report = await checkLocalFile(file, opts.purpose);
      const doc = {
        file: file.path,
        file_name: file.fileName,
        bytes: file.size,
        file_type: file.fileType,
        purpose: opts.purpose,
        valid: report ? report.valid : true,
        validation_report: report,
      };
      if (report && !report.valid) {
        // The same report the server would write, then exit code 2 with its reason.
        if (out.json) out.result({ ...doc, error: { message: report.error, type: 'file_check_failed' } }, () => {});
        else
          print(
            details([['File', file.path], ['Type', file.fileType], ['Purpose', opts.purpose], ...reportRows(report)]),
          );
        const err = new CliError(`${file.path} failed the file check: ${report.error}`, EXIT.USAGE);
        err.jsonPrinted = out.json;
        throw err;
      }
      out.result(doc, () => {
        print(
          details([
            ['File', file.path],
            ['Type', file.fileType],
            ['Purpose', opts.purpose],
            ['Size', bytes(file.size)],
            ...reportRows(report),
          ]),
        );
        print(
          report ? `${file.path} passed the check.` : `Files for ${opts.purpose} are not validated; nothing to check.`,
        );
      });
    });

  files
    .command('upload')
    .description('Upload a file (checked locally first); validation then runs on the server')
    .argument('<file>', 'path of the file')
    .option('--purpose <purpose>', `${FILE_PURPOSES.join(', ')}`, purposeOpt, 'fine-tune')
    .option('--file-name <name>', 'name to store it under (default: the file name of the path)')
    .option('--file-type <type>', 'jsonl, csv or parquet (default: from the extension)')
    .option('--no-check', 'skip the local check')
    .option('--wait', 'wait until the server has validated the file; fail if it is invalid')
    .action(
      async (
        filePath: string,
        opts: { purpose: FilePurpose; fileName?: string; fileType?: string; check: boolean; wait?: boolean },
        cmd: Command,
      ) => {
        const ctx = context(cmd);
        const file = await localFile(filePath, { fileName: opts.fileName, fileType: opts.fileType });
        if (opts.check) await checkOrFail(file, opts.purpose);
        let uploaded = await uploadFile(ctx.client, file, opts.purpose);
        if (opts.wait) uploaded = await waitForValidation(ctx, uploaded.id);
        ctx.out.result(uploaded, () => {
          print(fileDetails(uploaded));
          if (!opts.wait && PENDING.includes(uploaded.processing_status)) {
            print(`Validation runs on the server: gantry files retrieve ${uploaded.id}`);
          }
        });
      },
    );

  files
    .command('list')
    .description("The project's files, newest first")
    .action(async (_opts, cmd: Command) => {
      const { client, out } = context(cmd);
      const list = await client.get<{ data: FileObject[] }>('/v1/files');
      out.result(list, () =>
        print(
          list.data.length
            ? table(
                ['id', 'file name', 'purpose', 'type', 'size', 'status', 'created'],
                list.data.map((f) => [
                  f.id,
                  f.filename,
                  f.purpose,
                  f.FileType,
                  bytes(f.bytes),
                  f.processing_status,
                  time(f.created_at),
                ]),
              )
            : 'No files.',
        ),
      );
    });

  files
    .command('retrieve')
    .alias('get')
    .description('A file, with its processing status and validation report')
    .argument('<id>', 'file id')
    .action(async (id: string, _opts, cmd: Command) => {
      const { client, out } = context(cmd);
      const f = await client.get<FileObject>(`/v1/files/${encodeURIComponent(id)}`);
      out.result(f, () => print(fileDetails(f)));
    });

  files
    .command('download')
    .description("Download a file's content")
    .argument('<id>', 'file id')
    .option(
      '-o, --output <path>',
      'where to write it (default: the file name in the current directory, never a dotfile or an existing file)',
    )
    .action(async (id: string, opts: { output?: string }, cmd: Command) => {
      const { client, out } = context(cmd);
      const f = await client.get<FileObject>(`/v1/files/${encodeURIComponent(id)}`);
      const dest = opts.output ?? defaultDownloadName(f.filename, id);
      const res = await client.request('GET', `/v1/files/${encodeURIComponent(id)}/content`, {
        headers: { accept: '*/*' },
      });
      const written = await saveResponse(res, dest, `Downloading ${f.filename}`);
      out.result({ id, output: dest, bytes: written }, () => print(`Wrote ${dest} (${bytes(written)}).`));
    });

  files
    .command('delete')
    .description('Delete a file and its content')
    .argument('<id>', 'file id')
    .action(async (id: string, _opts, cmd: Command) => {
      const { client, out } = context(cmd);
      const res = await client.delete(`/v1/files/${encodeURIComponent(id)}`);
      out.result(res, () => print(`Deleted ${res.id}.`));
    });
}
