-- GPU clusters (spec: Clusters). The cluster workflow owns the truth; its
-- activities project each change into `state`, which the API reads. Storage
-- volumes and remediations have rows of their own so they can be listed and
-- filtered. The fleet_* tables are the local fleet SIMULATOR's own state
-- (DESIGN.md: compute provider `local`), shared by the control and GPU workers.

CREATE TABLE clusters (
  id          text PRIMARY KEY,
  project_id  text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name        text NOT NULL,
  workflow_id text NOT NULL,
  status      text NOT NULL,
  phase       text NOT NULL,
  -- the workflow's ClusterState (common/clusters.ts); version orders concurrent projections
  state       jsonb NOT NULL,
  version     integer NOT NULL DEFAULT 0,
  -- written by the activity that brings up the control plane; never passes through workflow history
  kube_config text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  deleted_at  timestamptz
);
CREATE INDEX clusters_by_project ON clusters (project_id, created_at DESC);

CREATE TABLE cluster_volumes (
  id                       text PRIMARY KEY,
  project_id               text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name                     text NOT NULL,
  region                   text NOT NULL,
  size_tib                 integer NOT NULL CHECK (size_tib > 0),
  status                   text NOT NULL CHECK (status IN ('provisioning', 'available', 'bound', 'deleting', 'failed')),
  is_lifecycle_independent boolean NOT NULL DEFAULT false,
  -- the cluster it is bound to, and the cluster that created it inline (deleted with it unless independent)
  cluster_id               text REFERENCES clusters(id) ON DELETE SET NULL,
  created_with_cluster     text,
  created_at               timestamptz NOT NULL DEFAULT now(),
  updated_at               timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cluster_volumes_by_project ON cluster_volumes (project_id, created_at DESC);

CREATE TABLE cluster_remediations (
  id          text PRIMARY KEY,
  cluster_id  text NOT NULL REFERENCES clusters(id) ON DELETE CASCADE,
  instance_id text NOT NULL,
  state       text NOT NULL,
  mode        text NOT NULL,
  trigger     text NOT NULL,
  -- the SDK's Remediation object as last recorded
  doc         jsonb NOT NULL,
  create_time timestamptz NOT NULL,
  update_time timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cluster_remediations_by_instance ON cluster_remediations (cluster_id, instance_id, create_time DESC);

-- ---- local fleet simulator ----

CREATE TABLE fleet_nodes (
  node_id      text PRIMARY KEY,
  instance_id  text NOT NULL UNIQUE,
  cluster_id   text NOT NULL,
  role         text NOT NULL,
  region       text NOT NULL,
  gpu_type     text NOT NULL,
  preemptible  boolean NOT NULL DEFAULT false,
  hardware     jsonb NOT NULL,
  -- phases are derived from when the node was (re)started and the simulator's step delay
  started_at   timestamptz NOT NULL DEFAULT now(),
  -- injected fault: the node stops in NODE_PHASE_FAILED instead of booting
  boot_fails   boolean NOT NULL DEFAULT false,
  cordoned     boolean NOT NULL DEFAULT false,
  released_at  timestamptz
);
CREATE INDEX fleet_nodes_by_cluster ON fleet_nodes (cluster_id);

CREATE TABLE fleet_faults (
  id         bigserial PRIMARY KEY,
  cluster_id text NOT NULL,
  -- null: the next node of the cluster that meets the check
  node_id    text,
  kind       text NOT NULL CHECK (kind IN ('boot_failure', 'acceptance_failure', 'nccl_failure', 'health_check_failure')),
  remaining  integer NOT NULL CHECK (remaining >= 0),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX fleet_faults_open ON fleet_faults (cluster_id, kind) WHERE remaining > 0;

CREATE TABLE fleet_capacity (
  region            text NOT NULL,
  gpu_type          text NOT NULL,
  -- preemptible nodes the fleet can hand out in this region; null = no limit
  preemptible_nodes integer CHECK (preemptible_nodes >= 0),
  PRIMARY KEY (region, gpu_type)
);

CREATE TABLE fleet_workloads (
  cluster_id           text PRIMARY KEY,
  pending_gpu_requests integer NOT NULL DEFAULT 0 CHECK (pending_gpu_requests >= 0),
  idle_gpus            integer NOT NULL DEFAULT 0 CHECK (idle_gpus >= 0),
  updated_at           timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE fleet_subnets (
  seq         bigserial,
  cluster_id  text PRIMARY KEY,
  created_at  timestamptz NOT NULL DEFAULT now(),
  released_at timestamptz
);

CREATE TABLE fleet_test_runs (
  id         bigserial PRIMARY KEY,
  cluster_id text NOT NULL,
  kind       text NOT NULL,
  node_ids   text[] NOT NULL,
  passed     boolean NOT NULL,
  detail     jsonb NOT NULL,
  ran_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX fleet_test_runs_by_cluster ON fleet_test_runs (cluster_id, ran_at);
