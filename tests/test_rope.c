/* tests/test_rope.c — RoPE with HF rope_scaling: the engine's frequencies (config_rope_inv_freq), its
 * cos/sin table (rope_table_fill) and the CPU kernels (rope_forward/backward), each against Hugging
 * Face's formulas evaluated here in double, written as HF writes them (_compute_llama3_parameters:
 * masks over the whole frequency vector) rather than as the engine does. A tiny config is chosen so
 * that the high, middle and low frequency bands of llama3 scaling are all present; the published
 * presets are checked as well. The CUDA kernels are checked against these CPU ones in
 * test_cuda_kernels / test_cuda_bf16 (on a GPU or through the emulator). */
#include "core/formats/config.h"
#include "kernels/kernels.h"
#include "tests/check.h"
#include "core/job/catalog.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PI 3.14159265358979323846

/* HF: inv_freq = 1/(base^(arange(0, dim, 2)/dim)), then the rope_scaling function of its type */
static void hf_inv_freq(double *out, int hd, double theta, const rope_scaling *r, int band[3]) {
    int half = hd / 2;
    double inv[512], scaled[512];
    for (int i = 0; i < half; i++) inv[i] = 1.0 / pow(theta, (double)(2 * i) / hd);
    band[0] = band[1] = band[2] = 0;
    if (r->type == ROPE_NONE) { memcpy(out, inv, half * sizeof *out); return; }
    if (r->type == ROPE_LINEAR) { for (int i = 0; i < half; i++) out[i] = inv[i] / r->factor; return; }
    double old = r->original_max_position_embeddings;
    double low_wl = old / r->low_freq_factor, high_wl = old / r->high_freq_factor;
    for (int i = 0; i < half; i++) {
        double wl = 2 * PI / inv[i];
        scaled[i] = wl > low_wl ? inv[i] / r->factor : inv[i];                        /* inv_freq_llama */
        double smooth = (old / wl - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
        double smoothed = (1 - smooth) * scaled[i] / r->factor + smooth * scaled[i];
        int medium = !(wl < high_wl) && !(wl > low_wl);
        out[i] = medium ? smoothed : scaled[i];
        band[wl < high_wl ? 0 : medium ? 1 : 2]++;
    }
}

static double max_rel(const double *a, const double *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]) / fabs(b[i]);
        m = e > m ? e : m;
    }
    return m;
}

static model_config tiny_cfg(rope_scaling r) {
    model_config c;
    char err[256];
    catalog_model(&c, "tiny", err, sizeof err); /* d 128, H 8: hd 16, theta 10000 */
    c.rope = r;
    return c;
}

/* out = R(t)·x in double from the HF frequencies: the kernels' reference */
static void ref_rope(double *out, const float *x, const double *f, int B, int T, int nh, int hd, int sign) {
    int half = hd / 2;
    for (size_t r = 0; r < (size_t)B * T * nh; r++) {
        int t = (int)(r / nh % T);
        for (int i = 0; i < half; i++) {
            double a = t * f[i], c = cos(a), s = sign * sin(a);
            double x1 = x[r * hd + i], x2 = x[r * hd + half + i];
            out[r * hd + i] = x1 * c - x2 * s;
            out[r * hd + half + i] = x2 * c + x1 * s;
        }
    }
}

static void test_kernels_with(const char *tag, const model_config *c, const double *f) {
    int B = 2, T = 2048, nh = 2, hd = c->hidden_size / c->num_attention_heads;
    size_t n = (size_t)B * T * nh * hd;
    double inv[512];
    config_rope_inv_freq(c, inv);
    float *tab = malloc(rope_table_floats(T, hd) * sizeof *tab), *x = malloc(n * 4), *y = malloc(n * 4);
    double *want = malloc(n * 8);
    rope_table_fill(tab, inv, T, hd);
    srand(7);
    for (size_t i = 0; i < n; i++) x[i] = (float)(2.0 * rand() / RAND_MAX - 1.0);
    char name[128];
    for (int dir = 0; dir < 2; dir++) {
        ref_rope(want, x, f, B, T, nh, hd, dir ? -1 : 1);
        memcpy(y, x, n * 4);
        if (dir) ops_cpu.rope_backward(y, y, tab, B, T, nh, hd);
        else ops_cpu.rope_forward(y, y, tab, B, T, nh, hd);
        double worst = 0;
        for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(y[i] - want[i]));
        /* fp32 cos/sin of angles up to 2047 rad (|x| <= 1): a few fp32 ulps of the result */
        snprintf(name, sizeof name, "rope_%s_%s_vs_hf_formula_T2048", tag, dir ? "backward" : "forward");
        CHECK(worst < 2e-6, name, "max abs error %.3g", worst);
    }
    free(tab), free(x), free(y), free(want);
}

static void test_tiny_bands(void) {
    struct { const char *tag; rope_scaling r; } cases[] = {
        {"none", {ROPE_NONE, 0, 0, 0, 0}},
        {"linear", {ROPE_LINEAR, 2.5, 0, 0, 0}},
        /* hd 16, theta 1e4: wavelengths 6.3, 20, 63, 199 | 628 | 1987, 6283, 19869 against 1024/4, 1024/1 */
        {"llama3", {ROPE_LLAMA3, 8.0, 1.0, 4.0, 1024}},
    };
    for (int k = 0; k < 3; k++) {
        model_config c = tiny_cfg(cases[k].r);
        char err[256], name[96];
        CHECK(config_validate(&c, err, sizeof err) == 0, "rope_tiny_config_valid", "%s", err);
        double got[8], want[8];
        int band[3];
        config_rope_inv_freq(&c, got);
        hf_inv_freq(want, 16, c.rope_theta, &c.rope, band);
        snprintf(name, sizeof name, "rope_inv_freq_%s_vs_hf", cases[k].tag);
        CHECK(max_rel(got, want, 8) < 1e-14, name, "max rel error %.3g", max_rel(got, want, 8));
        if (k == 2) {
            CHECK(band[0] == 4 && band[1] == 1 && band[2] == 3, "rope_llama3_tiny_has_all_three_bands",
                  "high %d medium %d low %d", band[0], band[1], band[2]);
            /* kept, interpolated (neither kept nor divided by the factor), divided */
            double plain = pow(10000.0, -8.0 / 16);
            CHECK(got[0] == 1.0 && fabs(got[3] / pow(10000.0, -6.0 / 16) - 1) < 1e-15 &&
                      fabs(got[7] * 8 / pow(10000.0, -14.0 / 16) - 1) < 1e-15 && got[4] < plain * 0.99 &&
                      got[4] > plain / 8 * 1.01,
                  "rope_llama3_bands_kept_interpolated_divided", "%g %g %g", got[0], got[4], got[7]);
        }
        test_kernels_with(cases[k].tag, &c, want);
    }
}

/* the published presets carry llama3 scaling, and their frequencies are HF's */
static void test_presets(void) {
    const char *p[] = {"llama3.2-1b", "llama3.2-3b", "llama3.1-8b"};
    for (int k = 0; k < 3; k++) {
        model_config c;
        char err[256], name[96];
        int rc = catalog_model(&c, p[k], err, sizeof err);
        int hd = c.hidden_size / c.num_attention_heads, band[3];
        double got[256], want[256];
        config_rope_inv_freq(&c, got);
        hf_inv_freq(want, hd, c.rope_theta, &c.rope, band);
        snprintf(name, sizeof name, "rope_inv_freq_%s_vs_hf", p[k]);
        CHECK(rc == 0 && c.rope.type == ROPE_LLAMA3 && max_rel(got, want, hd / 2) < 1e-14 && band[0] && band[1] &&
                  band[2], name, "rc %d rel %.3g bands %d %d %d", rc, max_rel(got, want, hd / 2), band[0], band[1], band[2]);
    }
}

int main(void) {
    test_tiny_bands();
    test_presets();
    return check_exit();
}
