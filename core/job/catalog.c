/* core/job/catalog.c — the catalogue of catalog.h: presets, GPUs, this host's machine file. Adding a preset
 * or a GPU is one row here (a GPU also gets its step-time model in core/cost/machine_gpus.c). */
#include "core/job/catalog.h"
#include "core/common/errmsg.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- presets ----------------------------------------------------------------------------------
 * tiny and small keep H, KV and f divisible by 8 so every 8-rank mesh (1x8 .. 8x1) is a valid
 * tensor-parallel split. The Llama 3 presets carry the published configs (shapes, rope_theta 500000 and
 * rope_scaling llama3: factor 32 for 3.2 1B/3B, 8 for 3.1 8B, low 1, high 4, original 8192), and the 3.2
 * models tie lm_head to embed_tokens, as published. */
typedef struct preset { // NOLINT(clang-analyzer-optin.performance.Padding): a table in reading order
    const char *name;
    int V, d, f, L, H, KV, max_pos;
    double theta, llama3_factor; /* 0: no rope_scaling */
    int tied;
} preset;

static const preset PRESETS[] = {
    {"tiny", 256, 128, 384, 4, 8, 8, 1024, 10000.0, 0, 0},
    {"small", 256, 256, 768, 6, 8, 8, 2048, 10000.0, 0, 0},
    {"llama3.2-1b", 128256, 2048, 8192, 16, 32, 8, 131072, 500000.0, 32.0, 1},
    {"llama3.2-3b", 128256, 3072, 8192, 28, 24, 8, 131072, 500000.0, 32.0, 1},
    {"llama3.1-8b", 128256, 4096, 14336, 32, 32, 8, 131072, 500000.0, 8.0, 0},
};
#define NPRESETS ((int)(sizeof PRESETS / sizeof PRESETS[0]))

int catalog_preset_count(void) { return NPRESETS; }
const char *catalog_preset_name(int i) { return i >= 0 && i < NPRESETS ? PRESETS[i].name : NULL; }

/* "a, b, c" of n names */
static void join(char *buf, size_t len, int n, const char *(*name)(int)) {
    size_t o = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i < n && o < len; i++) {
        int w = snprintf(buf + o, len - o, "%s%s", i ? ", " : "", name(i));
        if (w < 0) break;
        o += (size_t)w;
    }
}

void catalog_preset_names(char *buf, size_t len) { join(buf, len, NPRESETS, catalog_preset_name); }

static const preset *find_preset(const char *name) {
    for (int i = 0; name && i < NPRESETS; i++)
        if (!strcmp(PRESETS[i].name, name)) return &PRESETS[i];
    return NULL;
}

int catalog_is_preset(const char *name) { return find_preset(name) != NULL; }

int catalog_model(model_config *c, const char *name_or_path, char *err, size_t errlen) {
    char list[256];
    catalog_preset_names(list, sizeof list);
    if (!name_or_path || !*name_or_path) {
        errmsg_set(err, errlen, "model: empty name (presets: %s, or a path to an HF config.json)", list);
        return -1;
    }
    size_t n = strlen(name_or_path);
    if (strchr(name_or_path, '/') || (n >= 5 && strcmp(name_or_path + n - 5, ".json") == 0))
        return config_load_file(c, name_or_path, err, errlen);
    const preset *p = find_preset(name_or_path);
    if (!p) {
        errmsg_set(err, errlen, "unknown model '%s' (presets: %s; or a path to an HF config.json)", name_or_path, list);
        errmsg_one_line(err, errlen);
        return -1;
    }
    config_defaults(c);
    snprintf(c->name, sizeof c->name, "%s", p->name);
    c->vocab_size = p->V;
    c->hidden_size = p->d;
    c->intermediate_size = p->f;
    c->num_hidden_layers = p->L;
    c->num_attention_heads = p->H;
    c->num_key_value_heads = p->KV;
    c->max_position_embeddings = p->max_pos;
    c->rope_theta = p->theta;
    c->tie_word_embeddings = p->tied;
    if (p->llama3_factor > 0) c->rope = (rope_scaling){ROPE_LLAMA3, p->llama3_factor, 1.0, 4.0, 8192};
    return config_validate(c, err, errlen);
}

/* ---- GPUs --------------------------------------------------------------------------------------
 * Capacities are what the CUDA runtime reports as the device total (cudaMemGetInfo, or
 * cudaDeviceProp.totalGlobalMem; PyTorch prints it as "GPU 0 has a total capacity of X GiB"), read from
 * public logs, to 0.01 GiB; the driver's own reservation is already outside it. They vary by a few tens
 * of MiB with driver version and ECC, which the 1 GiB default reserve covers. Overheads are typical
 * values for one training rank, not guarantees: CUDA context (with lazy module loading) + cuBLAS/cuBLASLt
 * workspace (NVIDIA's cuBLAS guide recommends 32 MiB on Hopper, 4 MiB before) + NCCL buffers of a TP and
 * a DP communicator. A run on the device measures its own overhead (`--mem-budget auto`); the table
 * serves `--plan --gpu NAME` where no device is at hand. */
#define MiB (1024ull * 1024ull)
#define GIB_CENTI(x) ((uint64_t)(x) * 1024ull * 1024ull * 1024ull / 100ull) /* x hundredths of a GiB */
#define SRC_H100 "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM)"

static const catalog_gpu GPUS[CATALOG_NGPUS] = {
    [CATALOG_H100_80GB] = {CATALOG_H100_80GB, "h100-80gb", "NVIDIA H100 80GB HBM3", GIB_CENTI(7919), 1024 * MiB, 989.4, 3350,
     /* nvidia-smi memory.total 81559 MiB; "78.7 of 79.2 GiB free" right after a framework's CUDA start-up,
      * i.e. ~0.5 GiB context. Overhead: 512 MiB context + 32 MiB cuBLAS workspace + ~480 MiB NCCL buffers for
      * two communicators (NCCL_BUFFSIZE 4 MiB per channel and peer) = 1 GiB */
     "PyTorch OOM reports from H100 80GB HBM3 machines: \"GPU 0 has a total capacity of 79.19 GiB\"",
     SRC_H100 ": BF16 dense tensor 989.4 TFLOP/s (1979 with sparsity)", SRC_H100 ": HBM3 3.35 TB/s"},
    [CATALOG_H200_141GB] = {CATALOG_H200_141GB, "h200-141gb", "NVIDIA H200", GIB_CENTI(13980), (612 + 32 + 480) * MiB, 989.4, 4800,
     /* nvidia-smi memory.total 143771 MiB; a process holding only its context shows ~612 MiB in use */
     "PyTorch OOM reports from 8xH200 machines: total capacity 139.80 GiB (139.81 and 139.72 also seen)",
     "NVIDIA H200 datasheet: the H100's GH100 compute (BF16 dense 989.4 TFLOP/s)", "NVIDIA H200 datasheet: HBM3e 4.8 TB/s"},
    [CATALOG_A100_80GB] = {CATALOG_A100_80GB, "a100-80gb", "NVIDIA A100-SXM4-80GB", GIB_CENTI(7915), (450 + 4 + 480) * MiB, 312, 2039,
     /* overhead: ~450 MiB context (estimate, typical Ampere reports) + 4 MiB cuBLAS workspace + ~480 MiB NCCL */
     "PyTorch OOM reports from 80 GB A100s: total capacity 79.15 GiB (79.25 in older PyTorch wording)",
     "NVIDIA A100 datasheet: BF16 dense tensor 312 TFLOP/s (624 with sparsity)", "NVIDIA A100 80GB datasheet: HBM2e 2,039 GB/s"},
    [CATALOG_A100_40GB] = {CATALOG_A100_40GB, "a100-40gb", "NVIDIA A100-SXM4-40GB", GIB_CENTI(3939), (450 + 4 + 480) * MiB, 312, 1555,
     "PyTorch OOM reports from 40 GB A100s: total capacity 39.39 GiB (39.38-39.56 seen; the lowest common value taken)",
     "NVIDIA A100 datasheet: BF16 dense tensor 312 TFLOP/s (624 with sparsity)", "NVIDIA A100 40GB datasheet: HBM2 1,555 GB/s"},
};

const catalog_gpu *catalog_gpu_at(int i) { return i >= 0 && i < CATALOG_NGPUS ? &GPUS[i] : NULL; }

const catalog_gpu *catalog_gpu_find(const char *name) {
    for (int i = 0; name && i < CATALOG_NGPUS; i++)
        if (!strcasecmp(name, GPUS[i].name)) return &GPUS[i];
    return NULL;
}

const catalog_gpu *catalog_gpu_of_device(const char *device_name) {
    for (int i = 0; device_name && i < CATALOG_NGPUS; i++)
        if (!strncasecmp(device_name, GPUS[i].device, strlen(GPUS[i].device))) return &GPUS[i];
    return NULL;
}

static const char *gpu_name(int i) { return GPUS[i].name; }
void catalog_gpu_names(char *buf, size_t len) { join(buf, len, CATALOG_NGPUS, gpu_name); }

/* ---- this host's machine file ----------------------------------------------------------------- */
int catalog_exe_dir(char *out, size_t cap) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return -1;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) return -1;
    *slash = 0;
    if (strlen(self) >= cap) return -1;
    memcpy(out, self, strlen(self) + 1);
    return 0;
}

int catalog_machine_path(const char *dir, char *out, size_t cap) {
    char host[64] = {0};
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "unknown");
    for (char *c = host; *c; c++) if (*c == '/' || *c == ' ') *c = '_';
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int w = snprintf(out, cap, "%s/machines/%s-%ldc.json", dir, host, cores > 0 ? cores : 0);
    return w < 0 || (size_t)w >= cap ? -1 : 0;
}
