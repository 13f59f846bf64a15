/* core/common/cli.h — one table of options drives the parser, --help and, inverted, the command line that
 * sets them (style.md), for every program (build/train's table is core/job/options.c). `--name value` and
 * `--name=value`; flags take no value; an option given twice is refused (of a flag pair, --x and --no-x,
 * each may be given once and the last given wins).
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
    CLI_OFF,   /* flag: sets the int to 0 */
    CLI_OPT    /* string with an optional value: `--name VALUE` when the next argument does not start with
                * --, `--name=VALUE`, or bare `--name`, which sets it to "" (an empty value is refused, so
                * "" says bare; the program gives it its meaning) */
} cli_type;

/* What the ranks of one launch must share of an option (cli_opt.flags; core/job/job.c compares them) */
enum {
    CLI_SHARED = 0,        /* the value itself */
    CLI_LOCAL = 1,         /* not compared: one rank acts on it (--out, --log-every, --help) */
    CLI_PATH = 2,          /* a file: compared by kind (given, synthetic); its bytes are compared apart */
    CLI_NAME_OR_PATH = 4,  /* a name, or a file when it is not one of the names (--model) */
};

typedef struct cli_opt {
    const char *name;   /* without the leading -- */
    cli_type type;
    size_t off;         /* offsetof the field in the program's options struct */
    const char *meta;   /* value placeholder in --help (NULL for flags) */
    const char *help;
    unsigned flags;     /* CLI_LOCAL, CLI_PATH, CLI_NAME_OR_PATH (0: shared as it is) */
    const char *key;    /* who sets it when another program writes the command line (the sweep: its spec key),
                         * NULL when it is free */
    const char *bare;   /* CLI_OPT: the value the bare flag stands for */
} cli_opt;

/* Parse argv[1..] into dst; given[i] (when not NULL, n entries) is set to 1 for each option i that
 * appeared. -1 with one line in err on: an argument not starting with --, an unknown option, a flag given
 * a value, a missing, empty or malformed value, an option given a second time. */
int cli_parse(const cli_opt *opts, int n, void *dst, unsigned char *given, int argc, char **argv, char *err,
              size_t errlen);
/* The inverse for one option: its current value in dst as command-line text ("--name", then the value
 * when it takes one; a flag only when dst holds what it sets; a CLI_OPT holding its bare value as the
 * bare flag). Calls push once per argument; returns the number of arguments, or -1 when push failed. */
int cli_unparse(const cli_opt *o, const void *dst, int (*push)(void *ctx, const char *arg), void *ctx);
/* The value of option o in dst as text, exactly ("%.17g" for numbers, "on"/"off" for a flag's field) */
void cli_value_text(const cli_opt *o, const void *dst, char *out, size_t cap);
/* Errors of a program: one line "PROG: message" on stderr, printed only where rank0 is set (under
 * MPI every rank parses the same argv, so one rank speaks for all). */
void cli_set_program(const char *prog);
void cli_set_rank0(int rank0);
void cli_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "  --name META    help" per option */
void cli_usage(FILE *f, const cli_opt *opts, int n);
#endif
