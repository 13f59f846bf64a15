/* core/job/catalog.h — the catalogue: every list a user names a thing from, and where this host's machine
 * file lives, each held once (docs/where-to-change.md):
 *   - the model presets (--model NAME; a path is an HF config.json, core/formats/config.h),
 *   - the GPUs (--gpu NAME, --machine NAME, a CUDA device by the name its runtime gives): the memory the
 *     runtime reports and a rank's typical runtime overhead (what --plan --gpu budgets against), the
 *     datasheet's dense bf16 peak and HBM bandwidth, each with its source. A GPU's step-time model (its
 *     links, collectives and kernel efficiencies) is core/cost/machine_gpus.c, by the id given here;
 *   - this host's calibrated machine file, DIR/machines/HOST-Nc.json next to the programs.
 * The formulas of the reports are core/job/metrics.h. Pure data and look-ups: no I/O but the host name. */
#ifndef MESHSWEEP_CATALOG_H
#define MESHSWEEP_CATALOG_H
#include <stddef.h>
#include <stdint.h>

#include "core/formats/config.h"

/* ---- model presets ---------------------------------------------------------------------------- */
/* --model: a preset name, or a path to an HF config.json (a '/' in it or a .json ending), resolved and
 * validated (config_validate). -1 with one line in err. */
int catalog_model(model_config *c, const char *name_or_path, char *err, size_t errlen);
/* is name a preset (else --model is a path to a config.json)? */
int catalog_is_preset(const char *name);
int catalog_preset_count(void);
const char *catalog_preset_name(int i);   /* NULL out of range */
/* "tiny, small, llama3.2-1b, ..." */
void catalog_preset_names(char *buf, size_t len);

/* ---- GPUs ------------------------------------------------------------------------------------- */
typedef enum { CATALOG_H100_80GB, CATALOG_H200_141GB, CATALOG_A100_80GB, CATALOG_A100_40GB, CATALOG_NGPUS } catalog_gpu_id;

typedef struct catalog_gpu {
    catalog_gpu_id id;
    const char *name;         /* --gpu NAME: h100-80gb, ... */
    const char *device;       /* how the runtime names it (cudaGetDeviceProperties), a prefix */
    uint64_t usable_bytes;    /* total capacity as the runtime reports it */
    uint64_t overhead_bytes;  /* typical runtime overhead of one training rank */
    double peak_tflops;       /* dense bf16 tensor peak, datasheet */
    double memory_gbs;        /* HBM bandwidth, datasheet */
    const char *src_memory_bytes, *src_peak, *src_memory_gbs;
} catalog_gpu;

/* by --gpu name (case-insensitive), or NULL */
const catalog_gpu *catalog_gpu_find(const char *name);
/* by the name the CUDA runtime gives the device (its table name is a prefix of it), or NULL */
const catalog_gpu *catalog_gpu_of_device(const char *device_name);
const catalog_gpu *catalog_gpu_at(int i);   /* NULL out of range */
/* "h100-80gb, h200-141gb, a100-80gb, a100-40gb" */
void catalog_gpu_names(char *buf, size_t len);

/* ---- this host's machine file ----------------------------------------------------------------- */
/* The folder of the running program (/proc/self/exe), where machines/ lives; -1 if unknown */
int catalog_exe_dir(char *out, size_t cap);
/* dir/machines/HOST-Nc.json: this host's calibration, by its host name and online cores; -1 if too long */
int catalog_machine_path(const char *dir, char *out, size_t cap);
#endif
