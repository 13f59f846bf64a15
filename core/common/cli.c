/* core/common/cli.c — see cli.h. */
#include "core/common/cli.h"
#include "core/common/errmsg.h"
#include "core/common/parse.h"
#include <stdarg.h>
#include <stdlib.h>
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

int cli_parse(const cli_opt *opts, int n, void *dst, unsigned char *given, int argc, char **argv, char *err,
              size_t errlen) {
    unsigned char seen[256] = {0};
    if (n > (int)sizeof seen) { snprintf(err, errlen, "internal: more than %zu options", sizeof seen); return -1; }
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
        int di = -1;
        for (int k = 0; k < n; k++) if (!strcmp(opts[k].name, name)) di = k;
        if (di < 0) { snprintf(err, errlen, "unknown option '--%s' (see --help)", name); return -1; }
        const cli_opt *d = &opts[di];
        if (seen[di]) { /* the last value winning silently would run what was not meant */
            snprintf(err, errlen, "option --%s given twice: give it once", name);
            return -1;
        }
        seen[di] = 1;
        char *p = (char *)dst + d->off;
        if (d->type == CLI_ON || d->type == CLI_OFF) {
            if (val) { snprintf(err, errlen, "option --%s takes no value", name); return -1; }
            *(int *)p = d->type == CLI_ON;
            continue;
        }
        if (d->type == CLI_OPT) {
            if (!val && i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) val = argv[++i];
            if (val && !*val) { snprintf(err, errlen, "option --%s: empty value", name); return -1; }
            *(const char **)p = val ? val : d->bare ? d->bare : "";
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
    if (given) memcpy(given, seen, (size_t)n);
    return 0;
}

/* the shortest decimal that reads back as x */
static void shortest(char *buf, size_t cap, double x) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
}

void cli_value_text(const cli_opt *o, const void *dst, char *out, size_t cap) {
    const char *p = (const char *)dst + o->off;
    switch (o->type) {
    case CLI_INT: snprintf(out, cap, "%d", *(const int *)p); break;
    case CLI_LL: snprintf(out, cap, "%lld", *(const long long *)p); break;
    case CLI_DBL: snprintf(out, cap, "%.17g", *(const double *)p); break;
    case CLI_ON:
    case CLI_OFF: snprintf(out, cap, "%s", *(const int *)p < 0 ? "default" : *(const int *)p ? "on" : "off"); break;
    default: snprintf(out, cap, "%s", *(const char *const *)p ? *(const char *const *)p : "(none)"); break;
    }
}

int cli_unparse(const cli_opt *o, const void *dst, int (*push)(void *ctx, const char *arg), void *ctx) {
    const char *p = (const char *)dst + o->off;
    char flag[80], val[64];
    snprintf(flag, sizeof flag, "--%s", o->name);
    const char *v = val;
    switch (o->type) {
    case CLI_ON:
    case CLI_OFF:
        if (*(const int *)p != (o->type == CLI_ON)) return 0;
        return push(ctx, flag) ? -1 : 1;
    case CLI_INT: snprintf(val, sizeof val, "%d", *(const int *)p); break;
    case CLI_LL: snprintf(val, sizeof val, "%lld", *(const long long *)p); break;
    case CLI_DBL: shortest(val, sizeof val, *(const double *)p); break;
    default:
        v = *(const char *const *)p;
        if (!v) return 0;
        if (o->type == CLI_OPT && o->bare && !strcmp(v, o->bare)) return push(ctx, flag) ? -1 : 1;
        break;
    }
    return push(ctx, flag) || push(ctx, v) ? -1 : 2;
}

void cli_usage(FILE *f, const cli_opt *opts, int n) {
    for (int i = 0; i < n; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", opts[i].name, opts[i].meta ? " " : "", opts[i].meta ? opts[i].meta : "");
        fprintf(f, "  %-34s %s\n", left, opts[i].help);
    }
}
