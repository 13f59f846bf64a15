/* core/common/cli.h — one table of options drives both the parser and --help (style.md), for every program
 * (build/train, build/commbench). `--name value` and `--name=value`; flags take no value.
 * Not here: what the values mean (each program checks ranges and combinations itself). */
#ifndef MESHSWEEP_CLI_H
#define MESHSWEEP_CLI_H
#include <stddef.h>
#include <stdio.h>

typedef enum {
    CLI_INT,   /* int, any value in int range */
    CLI_LL,    /* long long >= 0 */
    CLI_DBL,   /* finite double */
    CLI_STR,   /* non-empty string (points into argv) */
    CLI_ON,    /* flag: sets the int to 1 */
    CLI_OFF    /* flag: sets the int to 0 */
} cli_type;

typedef struct cli_opt {
    const char *name;   /* without the leading -- */
    cli_type type;
    size_t off;         /* offsetof the field in the program's options struct */
    const char *meta;   /* value placeholder in --help (NULL for flags) */
    const char *help;
} cli_opt;

/* Parse argv[1..] into dst. -1 with one line in err on: an argument not starting with --, an
 * unknown option, a flag given a value, a missing, empty or malformed value. */
int cli_parse(const cli_opt *opts, int n, void *dst, int argc, char **argv, char *err, size_t errlen);
/* Errors of a program: one line "PROG: message" on stderr, printed only where rank0 is set (under
 * MPI every rank parses the same argv, so one rank speaks for all). */
void cli_set_program(const char *prog);
void cli_set_rank0(int rank0);
void cli_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "  --name META    help" per option */
void cli_usage(FILE *f, const cli_opt *opts, int n);
#endif
