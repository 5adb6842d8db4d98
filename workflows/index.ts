// The workflow bundle's entry: every workflow type is exported from here.
export * from './clusters';
export * from './deployments';
export * from './files';
export * from './fine-tunes';
export * from './node-remediation';
export * from './queue';
export * from './storage-volumes';
export * from './system';
export * from './model-uploads';
export * from './adapters';
export * from './rollouts';
export * from './audio';
export * from './usage';
export * from './model-file-uploads';
export * from './batches';
export * from './evaluations';
