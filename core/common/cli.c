/* core/common/cli.c — see cli.h. */
#include "core/common/cli.h"
#include "core/common/errmsg.h"
#include "core/formats/config.h"
#include <stdarg.h>
#include <string.h>

static const char *g_prog = "meshsweep";
static int g_rank0 = 1;
void cli_set_program(const char *prog) { g_prog = prog; }
void cli_set_rank0(int rank0) { g_rank0 = rank0; }
void cli_say(const char *fmt, ...) {
    if (!g_rank0) return;
    /* one line whatever the values in it hold: a newline in an option value, a path or a name
     * becomes '?' (errmsg_one_line), so one error is always one line */
    char line[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    errmsg_one_line(line, sizeof line);
    fprintf(stderr, "%s: %s\n", g_prog, line);
}

int cli_parse(const cli_opt *opts, int n, void *dst, int argc, char **argv, char *err, size_t errlen) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument '%s' (options start with --; see --help)", a);
            return -1;
        }
        char name[64];
        const char *val = NULL;
        const char *eq = strchr(a + 2, '=');
        size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (nl >= sizeof name) { snprintf(err, errlen, "unknown option '%.80s' (see --help)", a); return -1; }
        memcpy(name, a + 2, nl);
        name[nl] = 0;
        if (eq) val = eq + 1;
        const cli_opt *d = NULL;
        for (int k = 0; k < n; k++) if (!strcmp(opts[k].name, name)) d = &opts[k];
        if (!d) { snprintf(err, errlen, "unknown option '--%s' (see --help)", name); return -1; }
        char *p = (char *)dst + d->off;
        if (d->type == CLI_ON || d->type == CLI_OFF) {
            if (val) { snprintf(err, errlen, "option --%s takes no value", name); return -1; }
            *(int *)p = d->type == CLI_ON;
            continue;
        }
        if (d->type == CLI_OPT) {
            if (!val && i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) val = argv[++i];
            if (val && !*val) { snprintf(err, errlen, "option --%s: empty value", name); return -1; }
            *(const char **)p = val ? val : "";
            continue;
        }
        if (!val) {
            if (i + 1 >= argc) { snprintf(err, errlen, "option --%s needs a value (%s)", name, d->meta); return -1; }
            val = argv[++i];
        }
        long long v;
        double x;
        switch (d->type) {
        case CLI_INT:
            if (parse_int(val, -2147483647LL, 2147483647LL, &v)) {
                snprintf(err, errlen, "option --%s: '%.80s' is not an integer in [-2147483647, 2147483647]", name, val);
                return -1;
            }
            *(int *)p = (int)v;
            break;
        case CLI_LL:
            if (parse_int(val, 0, 9223372036854775807LL, &v)) {
                snprintf(err, errlen, "option --%s: '%.80s' is not an integer in [0, 9223372036854775807]", name, val);
                return -1;
            }
            *(long long *)p = v;
            break;
        case CLI_DBL:
            if (parse_double(val, &x)) {
                snprintf(err, errlen, "option --%s: '%.80s' is not a number (a finite decimal, e.g. 3e-4)", name, val);
                return -1;
            }
            *(double *)p = x;
            break;
        default: /* CLI_STR */
            if (!*val) { snprintf(err, errlen, "option --%s: empty value", name); return -1; }
            *(const char **)p = val;
            break;
        }
    }
    return 0;
}

void cli_usage(FILE *f, const cli_opt *opts, int n) {
    for (int i = 0; i < n; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", opts[i].name, opts[i].meta ? " " : "", opts[i].meta ? opts[i].meta : "");
        fprintf(f, "  %-34s %s\n", left, opts[i].help);
    }
}
