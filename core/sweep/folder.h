/* core/sweep/folder.h — a sweep's results folder: which folder a rerun may resume (same spec, same
 * build, same hosts, same input contents, made by the runner), the folder's identity file (runner.json), the per-folder
 * lock, and the UTC stamps folders are named by.
 * Not the runs inside the folder (core/sweep/runner.c) and not its outputs (core/sweep/report.c). */
#ifndef MESHSWEEP_SWEEP_FOLDER_H
#define MESHSWEEP_SWEEP_FOLDER_H
#include <stddef.h>

typedef struct json_t json_t;
typedef struct sweep_spec sweep_spec;

/* What a folder's results depend on besides the spec: the build and the hosts. */
typedef struct sweep_identity {
    char build_id[48];          /* hash of the train and sweep binaries ("fnv1a64:<train>.<sweep>") */
    char git[64];               /* "git describe --always --dirty" of the source tree; "" when unknown */
    char runner_host[256];      /* the runner's host name */
    char hostfile[512];         /* a hostfile named by the launcher or OMPI_MCA_orte_default_hostfile; "" */
    char hostfile_hash[24];     /* its content hash; "" when none or unreadable */
    char slurm_nodes[256];      /* SLURM_JOB_NODELIST; "" outside Slurm */
} sweep_identity;

/* Fill the identity for this runner, this train binary and this spec's launcher. 0 or -1 (err). */
int sweep_identity_get(sweep_identity *id, const char *train_path, const sweep_spec *s, char *err, size_t el);
/* The identity as a JSON object, and whether two identities name the same build and hosts; when
 * not, *why gets one short reason ("another build", "other hosts", ...). */
json_t *sweep_identity_json(const sweep_identity *id);
int sweep_identity_match(json_t *a, json_t *b, const char **why);

/* "20261201T093000Z" now (stamp) and "2026-12-01T09:30:00Z" (iso); either may be NULL. */
void sweep_utc_now(char *stamp, size_t scap, char *iso, size_t icap);
/* A stamp as folders are named (YYYYmmddTHHMMSSZ). */
int sweep_is_stamp(const char *s);

enum sweep_folder_kind { SWEEP_FOLDER_RUN = 1, SWEEP_FOLDER_PLAN };

/* This runner's latest <base>/<stamp> (its runner.json is readable and names these hosts; folders
 * copied from elsewhere or without a readable runner.json are passed over, whatever their stamp), if
 * it may be resumed: the same kind, and its spec.json and identity (build, hosts, the inputs'
 * contents) equal these. Returns 1 (out filled), 0 none. *why_not says which folders were passed
 * over or not resumed, and why (one line). */
int sweep_folder_find(const char *base, json_t *spec, json_t *identity, int kind, char *out, size_t cap,
                      char *why_not, size_t wcap);
/* Create <base>/<stamp>/ with spec.json and runner.json (kind, identity, created), locked. 0 or -1
 * (a line on stderr). *lock_fd receives the held lock. */
int sweep_folder_create(const char *base, json_t *spec, json_t *identity, int kind, char *out, size_t cap,
                        int *lock_fd);
/* Take the folder's lock (flock on DIR/.lock, held until exit). 0; -2 when another runner holds it
 * (a line on stderr naming its pid); -1 when it cannot be taken (errno in the line). */
int sweep_folder_lock(const char *dir, int *lock_fd);
/* The created stamp of a folder (its runner.json), "" when unknown. */
void sweep_folder_created(const char *dir, char *iso, size_t cap);
#endif
