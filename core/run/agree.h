/* core/run/agree.h — the one rule for failures that happen on one rank alone (design: bad input on every
 * rank), and what the ranks know about each other's hosts.
 *
 * The rule: a rank that fails before or between collectives records its own error (agree_fail), then
 * carries on to the next agreement point (agree_check) instead of exiting. There all ranks learn,
 * with one small all-reduce of a status word, whether any rank failed; if one did, rank 0 prints the
 * error of the lowest failing rank as one line, `PROG: rank R on HOST: message` (`PROG: message` on a
 * 1-rank run, and when every rank failed with the same code and message: the rank says nothing then),
 * and agree_check returns that rank's exit code on every rank, so every rank exits with the same code
 * and none is left waiting in a collective.
 *
 * The map: agree_init gathers every rank's host name and CPU affinity once, for the run record
 * (env.ranks_by_host, env.cores_by_host) and for the check that a TP group stays on one host.
 *
 * The input check: agree_inputs compares the size and a sampled content hash of each input file
 * (first and last 64 KiB and 14 blocks of 4 KiB spread over the file) across ranks; a file that
 * differs between hosts is named with the hosts that disagree (exit 2).
 *
 * Not here: the errors every rank finds alike (argument parsing: cli_say), and faults inside a
 * collective (a rank that dies: the launcher ends the job). */
#ifndef MESHSWEEP_AGREE_H
#define MESHSWEEP_AGREE_H
#include <jansson.h>
#include <stddef.h>
#include "core/job/job.h"

/* Collective over MPI_COMM_WORLD, after MPI_Init: rank, world, host names and affinities of all
 * ranks. prog is the prefix of the printed line. 0, or -1 when out of host memory (then the map is
 * empty and hosts read "?"). */
int agree_init(const char *prog);
void agree_free(void);

int agree_rank(void);
int agree_world(void);
const char *agree_host(void);             /* this rank's host name */
const char *agree_host_of(int rank);      /* any rank's host name ("?" before agree_init) */

/* Records this rank's failure: code is the exit code it asks for (1 a fault, 2 bad input), the
 * message one line without the program name. The first failure recorded wins until agree_check. */
void agree_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int agree_failed(void);                   /* has this rank recorded a failure? */

/* Collective: 0 when no rank failed. Otherwise rank 0 has printed the lowest failing rank's line
 * and every rank returns that rank's code. The recorded failure is cleared either way. */
int agree_check(void);
/* The first (lowest-rank) error of the last failed agree_check, as printed without the program
 * name: for the run record. "" when there was none. */
const char *agree_last_error(void);

/* One input of the cross-rank check: label as the user wrote it ("--data"), path as given. */
typedef struct agree_input { const char *label, *path; } agree_input;
/* Collective: each rank measures its own copy of each path (a path that is not a regular file
 * counts by its kind, not its bytes; PATH.bin and PATH.idx are measured for an indexed dataset
 * prefix); when a file differs between ranks, rank 0 prints one line naming the file and the hosts
 * that differ and every rank returns 2. 0 when all agree. */
int agree_inputs(const agree_input *in, int n);

/* One field of the configuration every rank must share: label as the user knows it ("--steps",
 * "--model"), value as text (numbers printed exactly, "%.17g"); a value longer than the buffer is
 * compared by its first AGREE_VALUE_LEN-1 bytes. */
enum { AGREE_VALUE_LEN = JOB_FIELD_LEN };
typedef job_field agree_field; /* core/job/job.h: what a job says the ranks share */
/* Collective: compares the fields across ranks, in order, with collectives whose sizes no rank's
 * data can change (so ranks that disagree cannot hang it): the field count (a different count means
 * different builds of the program), one hash per field, then the values of the first field that
 * differs. When one differs, rank 0 prints one line, `PROG: LABEL differs between ranks: VALUE on
 * rank R (HOST), ...; VALUE on rank Q (HOST)`, and every rank returns 2. 0 when all agree. */
int agree_fields(const agree_field *f, int n);

/* {"hostA": [0,1,2,3], "hostB": [4,5,6,7]} in order of first rank */
json_t *agree_ranks_by_host(void);
/* {"hostA": 2, ...}: distinct CPUs in the union of the affinity masks of the job's ranks there */
json_t *agree_cores_by_host(void);
/* ranks on this rank's host, and the cores available to the job there (as agree_cores_by_host) */
int agree_ranks_on_host(int rank);
int agree_cores_on_host(int rank);
/* does any group of tp consecutive ranks span more than one host? */
int agree_tp_spans_hosts(int tp);
/* number of distinct hosts */
int agree_nhosts(void);
#endif
