/* tests/emu/nccl_emu.cuh — NCCL for the host emulator (tests/emu/cuda_emu.cuh), so that
 * core/engine/comm_nccl.c runs unchanged on machines without GPUs, one emulated GPU per MPI rank.
 *
 * What it is: the NCCL calls meshsweep uses, with NCCL's signatures. A collective is queued on its
 * stream like any other work; when the stream reaches it, it starts the matching non-blocking MPI
 * collective on the (host) device buffers of this rank, and the stream stays blocked until MPI
 * completes it, while other streams go on running — so a collective overlaps compute here as on
 * the device, and a kernel that reads its output without waiting for its event sees a wrong
 * result. Per communicator the collectives start in stream order, which is the order NCCL
 * requires of all ranks; a rank only waits for a collective when its host waits for that
 * stream, which every rank does at the same point of the program, so no order of the lazy
 * execution can deadlock. Sums of bf16 add each pair in fp32 and round to nearest even.
 * ncclGetUniqueId names its creator (world rank and a counter); ncclCommInitRank splits
 * MPI_COMM_WORLD by that name, so every world rank must create its communicators in the same
 * sequence (the engine does: TP group, then DP group, on every rank) — a mismatch is reported.
 * One device, several communicators: MESHSWEEP_EMU_NCCL_SERIAL=1 lets this rank's device run one
 * collective at a time, in the order the host issued them over all its communicators (the worst case
 * of NCCL kernels that cannot run side by side on one GPU: too few SMs, or one waiting for the
 * previous one to finish). Ranks that issue the collectives of two shared communicators in different
 * orders then deadlock, as they can on GPUs; ranks that keep one order do not (docs/gpu.md).
 * The issue order itself: MESHSWEEP_EMU_NCCL_LOG=PREFIX makes each rank write PREFIX.<world rank>, one line
 * per collective as its host issues it, over all its communicators: "<communicator> <call> <count> <type>",
 * the communicator numbered in this rank's creation order (0, 1, ...); ranks that keep one issue order
 * write the same file whatever their place in the mesh (t_cuda_engine_emu compares them).
 * Faults for tests: MESHSWEEP_EMU_NCCL_FAIL=unique_id makes ncclGetUniqueId fail;
 * MESHSWEEP_EMU_NCCL_FAIL=init:R makes ncclCommInitRank fail on world rank R.
 * What it is not: NCCL's algorithms, its bandwidth, or NCCL's restriction to one GPU per rank;
 * ncclGroupStart/End only nest (every call in a group is queued on its own, in order).
 * Needs mpi.h: only core/engine/comm_nccl.c includes it, compiled as C++ in the engine emulator test.
 */
#ifndef MESHSWEEP_NCCL_EMU_CUH
#define MESHSWEEP_NCCL_EMU_CUH
#include "tests/emu/cuda_emu.cuh"
#include <climits>
#include <mpi.h>

typedef enum { ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3,
               ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7 } ncclResult_t;
typedef enum { ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5,
               ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 } ncclDataType_t;
#define ncclFloat ncclFloat32
#define ncclDouble ncclFloat64
#define ncclInt ncclInt32
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;
struct emu_nccl_comm {
    MPI_Comm c;
    int rank, size;
    bool aborted;
    uint64_t pending; /* queued collectives not yet complete */
    int index;        /* this rank's creation order of its communicators */
};
inline int emu_nccl_ncomms = 0;
typedef emu_nccl_comm *ncclComm_t;

inline const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "unhandled system error (emulated fault)";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    default: return "internal error";
    }
}
/* the emulated NCCL says it is 2.27.3 (encoded as NCCL >= 2.9 does: 10000·major + 100·minor + patch) */
inline ncclResult_t ncclGetVersion(int *v) { *v = 22703; return ncclSuccess; }
inline int emu_world_rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}
inline bool emu_nccl_fault(const char *what) {
    const char *e = getenv("MESHSWEEP_EMU_NCCL_FAIL");
    if (!e) return false;
    if (!strcmp(what, "unique_id")) return !strcmp(e, "unique_id");
    if (!strncmp(e, "init:", 5)) return atoi(e + 5) == emu_world_rank();
    return false;
}
struct emu_nccl_id {
    char magic[8];
    int creator, serial;
};
inline int emu_nccl_serial = 0;
inline ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    if (emu_nccl_fault("unique_id")) return ncclSystemError;
    memset(id, 0, sizeof *id);
    emu_nccl_id e;
    memcpy(e.magic, "emunccl", 8);
    e.creator = emu_world_rank();
    e.serial = ++emu_nccl_serial;
    memcpy(id->internal, &e, sizeof e);
    return ncclSuccess;
}
inline ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
    emu_nccl_id e;
    memcpy(&e, id.internal, sizeof e);
    if (memcmp(e.magic, "emunccl", 8) || e.serial <= 0 || e.serial >= 4096 || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    MPI_Comm c;
    /* collective over the world: see the header comment */
    if (MPI_Comm_split(MPI_COMM_WORLD, e.creator * 4096 + e.serial, rank, &c) != MPI_SUCCESS) return ncclSystemError;
    int sz = 0, rk = -1;
    MPI_Comm_size(c, &sz);
    MPI_Comm_rank(c, &rk);
    if (sz != nranks || rk != rank) {
        emu_error("ncclCommInitRank: rank %d of %d, but %d ranks joined with this id (they must create their "
                  "communicators in the same sequence)", rank, nranks, sz);
        MPI_Comm_free(&c);
        return ncclInvalidUsage;
    }
    if (emu_nccl_fault("init")) {
        MPI_Comm_free(&c);
        return ncclSystemError;
    }
    *out = new emu_nccl_comm{c, rank, nranks, false, 0, emu_nccl_ncomms++};
    return ncclSuccess;
}
inline ncclResult_t ncclCommCount(const ncclComm_t c, int *n) { *n = c->size; return ncclSuccess; }
inline ncclResult_t ncclCommUserRank(const ncclComm_t c, int *r) { *r = c->rank; return ncclSuccess; }
inline ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t *r) { *r = ncclSuccess; return ncclSuccess; }
inline int emu_nccl_group_depth = 0;
inline ncclResult_t ncclGroupStart() { emu_nccl_group_depth++; return ncclSuccess; }
inline ncclResult_t ncclGroupEnd() {
    if (emu_nccl_group_depth <= 0) return ncclInvalidUsage;
    emu_nccl_group_depth--;
    return ncclSuccess;
}
/* waits for the communicator's queued collectives (as ncclCommDestroy does), then frees it */
inline ncclResult_t ncclCommDestroy(ncclComm_t c) {
    if (!c) return ncclInvalidArgument;
    emu_run_until([c] { return c->pending == 0; });
    if (!c->aborted) MPI_Comm_free(&c->c);
    delete c;
    return ncclSuccess;
}
/* queued collectives of an aborted communicator complete without moving data; the MPI
 * communicator is left alone (its peers may never come) */
inline ncclResult_t ncclCommAbort(ncclComm_t c) {
    if (!c) return ncclInvalidArgument;
    c->aborted = true;
    emu_run_until([c] { return c->pending == 0; });
    delete c;
    return ncclSuccess;
}

inline float emu_bf16_f(uint16_t h) { return __uint_as_float((unsigned)h << 16); }
inline uint16_t emu_f_bf16(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
inline void emu_bf16_sum(void *in, void *io, int *n, MPI_Datatype *) {
    const uint16_t *a = (const uint16_t *)in;
    uint16_t *b = (uint16_t *)io;
    for (int i = 0; i < *n; i++) b[i] = emu_f_bf16(emu_bf16_f(a[i]) + emu_bf16_f(b[i]));
}
inline void emu_bf16_max(void *in, void *io, int *n, MPI_Datatype *) {
    const uint16_t *a = (const uint16_t *)in;
    uint16_t *b = (uint16_t *)io;
    for (int i = 0; i < *n; i++) b[i] = emu_bf16_f(a[i]) > emu_bf16_f(b[i]) ? a[i] : b[i];
}
inline bool emu_nccl_type(ncclDataType_t t, MPI_Datatype *mt, size_t *esz) {
    switch (t) {
    case ncclInt8: *mt = MPI_INT8_T; *esz = 1; return true;
    case ncclUint8: *mt = MPI_UINT8_T; *esz = 1; return true;
    case ncclInt32: *mt = MPI_INT32_T; *esz = 4; return true;
    case ncclUint32: *mt = MPI_UINT32_T; *esz = 4; return true;
    case ncclInt64: *mt = MPI_INT64_T; *esz = 8; return true;
    case ncclUint64: *mt = MPI_UINT64_T; *esz = 8; return true;
    case ncclFloat32: *mt = MPI_FLOAT; *esz = 4; return true;
    case ncclFloat64: *mt = MPI_DOUBLE; *esz = 8; return true;
    case ncclBfloat16: *mt = MPI_UINT16_T; *esz = 2; return true;
    default: return false; /* fp16 is not used by meshsweep */
    }
}
inline bool emu_nccl_op(ncclRedOp_t op, ncclDataType_t t, MPI_Op *mo) {
    static MPI_Op bsum = MPI_OP_NULL, bmax = MPI_OP_NULL;
    if (t == ncclBfloat16) {
        if (op == ncclSum) {
            if (bsum == MPI_OP_NULL) MPI_Op_create(emu_bf16_sum, 1, &bsum);
            *mo = bsum;
            return true;
        }
        if (op == ncclMax) {
            if (bmax == MPI_OP_NULL) MPI_Op_create(emu_bf16_max, 1, &bmax);
            *mo = bmax;
            return true;
        }
        return false;
    }
    switch (op) {
    case ncclSum: *mo = MPI_SUM; return true;
    case ncclProd: *mo = MPI_PROD; return true;
    case ncclMax: *mo = MPI_MAX; return true;
    case ncclMin: *mo = MPI_MIN; return true;
    default: return false; /* ncclAvg is not used by meshsweep */
    }
}

/* the queued form of one collective: start() begins the MPI operation when the stream reaches
 * it, finish() runs once it has completed */
struct emu_nccl_op_state {
    MPI_Request req = MPI_REQUEST_NULL;
    std::vector<unsigned char> tmp;
};
/* issue order on this rank's device over every communicator: tickets handed out at the call, the
 * number of collectives finished (MESHSWEEP_EMU_NCCL_SERIAL: a collective starts only when every
 * earlier ticket has finished) */
inline uint64_t emu_nccl_tickets = 0, emu_nccl_finished = 0;
inline bool emu_nccl_one_at_a_time() {
    static int s = -1;
    if (s < 0) {
        const char *e = getenv("MESHSWEEP_EMU_NCCL_SERIAL");
        s = e && e[0] == '1';
    }
    return s == 1;
}
/* MESHSWEEP_EMU_NCCL_LOG: this rank's issue order (header comment); written line by line, so a run that
 * hangs or aborts still leaves what it issued */
inline void emu_nccl_log(const ncclComm_t c, const char *what, size_t n, ncclDataType_t t) {
    static FILE *f = nullptr;
    static int state = 0; /* 0 not decided, 1 logging, -1 not */
    if (state == 0) {
        const char *e = getenv("MESHSWEEP_EMU_NCCL_LOG");
        state = -1;
        if (e && *e) {
            char path[4096];
            snprintf(path, sizeof path, "%s.%d", e, emu_world_rank());
            f = fopen(path, "w");
            if (!f) emu_error("MESHSWEEP_EMU_NCCL_LOG: cannot write %s", path);
            else state = 1;
        }
    }
    if (state != 1) return;
    fprintf(f, "%d %s %zu %d\n", c->index, what, n, (int)t);
    fflush(f);
}
template <typename Start, typename Finish>
inline ncclResult_t emu_nccl_enqueue(ncclComm_t c, cudaStream_t st, const char *what, std::vector<uint64_t> refs,
                                     Start start, Finish finish) {
    if (!c) return ncclInvalidArgument;
    c->pending++;
    auto state = std::make_shared<emu_nccl_op_state>();
    const uint64_t ticket = emu_nccl_tickets++;
    emu_enqueue(st, what, [c, state, start, finish, ticket, started = false]() mutable {
        if (c->aborted) {
            c->pending--;
            emu_nccl_finished++;
            return 1;
        }
        if (!started) {
            if (emu_nccl_one_at_a_time() && ticket != emu_nccl_finished) return 0; /* an earlier one still runs */
            started = true;
            start(c, *state);
        }
        int done = 0;
        MPI_Test(&state->req, &done, MPI_STATUS_IGNORE);
        if (!done) return 0;
        finish(c, *state);
        c->pending--;
        emu_nccl_finished++;
        return 1;
    }, std::move(refs));
    return ncclSuccess;
}
inline std::vector<uint64_t> emu_nccl_refs(const void *a, const void *b, const char *what) {
    std::vector<uint64_t> r;
    if (a) emu_ref(r, a, what);
    if (b && b != a) emu_ref(r, b, what);
    return r;
}
inline bool emu_nccl_count_ok(size_t n, int size) { return n <= (size_t)INT_MAX / (size_t)(size > 0 ? size : 1); }

inline ncclResult_t ncclAllReduce(const void *send, void *recv, size_t n, ncclDataType_t t, ncclRedOp_t op,
                                  ncclComm_t c, cudaStream_t st) {
    MPI_Datatype mt;
    MPI_Op mo;
    size_t esz;
    if (!c || !emu_nccl_type(t, &mt, &esz) || !emu_nccl_op(op, t, &mo) || !emu_nccl_count_ok(n, 1))
        return ncclInvalidArgument;
    emu_nccl_log(c, "ncclAllReduce", n, t);
    return emu_nccl_enqueue(c, st, "ncclAllReduce", emu_nccl_refs(send, recv, "ncclAllReduce"),
        [=](ncclComm_t cc, emu_nccl_op_state &s) {
            MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)n, mt, mo, cc->c, &s.req);
        }, [](ncclComm_t, emu_nccl_op_state &) {});
}
/* recv[size*n] <- every rank's send[n]; in place when send == recv + rank*n */
inline ncclResult_t ncclAllGather(const void *send, void *recv, size_t n, ncclDataType_t t, ncclComm_t c,
                                  cudaStream_t st) {
    MPI_Datatype mt;
    size_t esz;
    if (!c || !emu_nccl_type(t, &mt, &esz) || !emu_nccl_count_ok(n, c->size)) return ncclInvalidArgument;
    const bool in_place = (const char *)send == (const char *)recv + (size_t)c->rank * n * esz;
    if (!in_place) emu_check_overlap(recv, send, n * esz); /* partial overlap is undefined */
    emu_nccl_log(c, "ncclAllGather", n, t);
    return emu_nccl_enqueue(c, st, "ncclAllGather", emu_nccl_refs(send, recv, "ncclAllGather"),
        [=](ncclComm_t cc, emu_nccl_op_state &s) {
            MPI_Iallgather(in_place ? MPI_IN_PLACE : send, (int)n, mt, recv, (int)n, mt, cc->c, &s.req);
        }, [](ncclComm_t, emu_nccl_op_state &) {});
}
/* recv[n] <- this rank's part of the reduction of send[size*n]; recv may be send + rank*n */
inline ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t n, ncclDataType_t t, ncclRedOp_t op,
                                      ncclComm_t c, cudaStream_t st) {
    MPI_Datatype mt;
    MPI_Op mo;
    size_t esz;
    if (!c || !emu_nccl_type(t, &mt, &esz) || !emu_nccl_op(op, t, &mo) || !emu_nccl_count_ok(n, c->size))
        return ncclInvalidArgument;
    emu_nccl_log(c, "ncclReduceScatter", n, t);
    return emu_nccl_enqueue(c, st, "ncclReduceScatter", emu_nccl_refs(send, recv, "ncclReduceScatter"),
        [=](ncclComm_t cc, emu_nccl_op_state &s) {
            s.tmp.resize(n * esz); /* MPI forbids aliasing send and recv; NCCL allows the in-place form */
            MPI_Ireduce_scatter_block(send, s.tmp.data(), (int)n, mt, mo, cc->c, &s.req);
        }, [=](ncclComm_t, emu_nccl_op_state &s) { memcpy(recv, s.tmp.data(), n * esz); });
}
inline ncclResult_t ncclBroadcast(const void *send, void *recv, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                                  cudaStream_t st) {
    MPI_Datatype mt;
    size_t esz;
    if (!c || !emu_nccl_type(t, &mt, &esz) || root < 0 || root >= c->size || !emu_nccl_count_ok(n, 1))
        return ncclInvalidArgument;
    emu_nccl_log(c, "ncclBroadcast", n, t);
    return emu_nccl_enqueue(c, st, "ncclBroadcast",
        emu_nccl_refs(c->rank == root ? send : nullptr, recv, "ncclBroadcast"),
        [=](ncclComm_t cc, emu_nccl_op_state &s) {
            if (cc->rank == root && send != recv) memcpy(recv, send, n * esz);
            MPI_Ibcast(recv, (int)n, mt, root, cc->c, &s.req);
        }, [](ncclComm_t, emu_nccl_op_state &) {});
}
inline ncclResult_t ncclBcast(void *buf, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st) {
    return ncclBroadcast(buf, buf, n, t, root, c, st);
}
#endif
