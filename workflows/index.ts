// The workflow bundle's entry: every workflow type is exported from here.
export * from './files';
export * from './fine-tunes';
export * from './system';
