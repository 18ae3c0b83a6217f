/*
 * ProfileWeaver CUPTI activity-injection library.
 *
 * Loaded by the CUDA driver through CUDA_INJECTION64_PATH: the driver calls InitializeInjection()
 * once, on the first CUDA call of the process, so the program needs no change and no rebuild.
 * We enable CUPTI's asynchronous activity buffers for kernels, memcpy, memset, synchronization
 * and runtime API calls, and write each completed record as one JSON line (the shape of
 * ledger/gpu_activity.py: {"type": "kernel" | "memcpy" | "memset" | "sync" | "api", ...}) to the
 * file named by PW_CUPTI_OUT. Buffers are drained at exit (atexit -> cuptiActivityFlushAll).
 *
 * Why activity records and not callbacks: CUPTI fills the records off the critical path (the GPU
 * timestamps come from the hardware), so the program's own timing changes little. Buffers are 8 MiB:
 * few buffer-completion calls, each one a single locked write.
 *
 * Kernel names are demangled here, with __cxa_demangle from the process (CUDA C++ programs link
 * libstdc++); when it is absent the mangled name is kept and "demangled" is null.
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PW_BUF_SIZE (8u * 1024u * 1024u)
#define PW_ALIGN 8u

static FILE *pw_out = NULL;
static pthread_mutex_t pw_lock = PTHREAD_MUTEX_INITIALIZER;
static int pw_initialized = 0;
typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static demangle_fn pw_demangle = NULL;

static void pw_warn(const char *what, CUptiResult r)
{
    const char *msg = NULL;
    cuptiGetResultString(r, &msg);
    fprintf(stderr, "pw-cupti: %s failed: %s\n", what, msg ? msg : "unknown error");
}

/* JSON string body: escape quote, backslash and control characters. */
static void pw_json_str(FILE *f, const char *s)
{
    if (s == NULL) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static const char *pw_copy_kind(uint8_t k)
{
    switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "other";
    }
}

static const char *pw_sync_kind(CUpti_ActivitySynchronizationType t)
{
    switch (t) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "stream_wait_event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "stream";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "context";
    default: return "other";
    }
}

static void pw_write_kernel(FILE *f, const CUpti_ActivityKernel10 *k)
{
    char *dem = NULL;
    if (pw_demangle && k->name) {
        int status = 0;
        dem = pw_demangle(k->name, NULL, NULL, &status);
        if (status != 0) {
            free(dem);
            dem = NULL;
        }
    }
    fputs("{\"type\":\"kernel\",\"name\":", f);
    pw_json_str(f, k->name ? k->name : "<unknown>");
    fputs(",\"demangled\":", f);
    pw_json_str(f, dem);
    fprintf(f, ",\"start_ns\":%llu,\"end_ns\":%llu,\"device\":%u,\"stream\":%u,\"correlation_id\":%u,"
               "\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d],\"registers_per_thread\":%u,"
               "\"static_shared_bytes\":%d,\"dynamic_shared_bytes\":%d}\n",
            (unsigned long long)k->start, (unsigned long long)k->end, k->deviceId, k->streamId,
            k->correlationId, k->gridX, k->gridY, k->gridZ, k->blockX, k->blockY, k->blockZ,
            (unsigned)k->registersPerThread, k->staticSharedMemory, k->dynamicSharedMemory);
    free(dem);
}

static void pw_write_record(FILE *f, CUpti_Activity *rec)
{
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        pw_write_kernel(f, (const CUpti_ActivityKernel10 *)rec);
        break;
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
        fprintf(f, "{\"type\":\"memcpy\",\"copy_kind\":\"%s\",\"bytes\":%llu,\"start_ns\":%llu,"
                   "\"end_ns\":%llu,\"device\":%u,\"stream\":%u,\"correlation_id\":%u}\n",
                pw_copy_kind(m->copyKind), (unsigned long long)m->bytes, (unsigned long long)m->start,
                (unsigned long long)m->end, m->deviceId, m->streamId, m->correlationId);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
        fprintf(f, "{\"type\":\"memset\",\"bytes\":%llu,\"start_ns\":%llu,\"end_ns\":%llu,"
                   "\"device\":%u,\"stream\":%u,\"correlation_id\":%u}\n",
                (unsigned long long)m->bytes, (unsigned long long)m->start, (unsigned long long)m->end,
                m->deviceId, m->streamId, m->correlationId);
        break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)rec;
        fprintf(f, "{\"type\":\"sync\",\"sync_kind\":\"%s\",\"start_ns\":%llu,\"end_ns\":%llu,"
                   "\"stream\":%u,\"correlation_id\":%u}\n",
                pw_sync_kind(s->type), (unsigned long long)s->start, (unsigned long long)s->end,
                s->streamId == (uint32_t)CUPTI_SYNCHRONIZATION_INVALID_VALUE ? 0u : s->streamId,
                s->correlationId);
        break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
        const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)rec;
        const char *name = NULL;
        if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name) != CUPTI_SUCCESS)
            name = NULL;
        fputs("{\"type\":\"api\",\"name\":", f);
        pw_json_str(f, name ? name : "<unknown runtime api>");
        fprintf(f, ",\"start_ns\":%llu,\"end_ns\":%llu,\"thread\":%u,\"correlation_id\":%u}\n",
                (unsigned long long)a->start, (unsigned long long)a->end, a->threadId, a->correlationId);
        break;
    }
    default:
        break;
    }
}

static void CUPTIAPI pw_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    uint8_t *b = NULL;
    if (posix_memalign((void **)&b, PW_ALIGN, PW_BUF_SIZE) != 0)
        b = NULL;
    *buffer = b;
    *size = b ? PW_BUF_SIZE : 0;
    *max_records = 0; /* as many as fit */
}

static void CUPTIAPI pw_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                         size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&pw_lock);
    if (pw_out) {
        while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
            pw_write_record(pw_out, rec);
    }
    pthread_mutex_unlock(&pw_lock);
    free(buffer);
}

static void pw_at_exit(void)
{
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS)
        pw_warn("cuptiActivityFlushAll", r);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped)
        fprintf(stderr, "pw-cupti: %zu activity records dropped\n", dropped);
    pthread_mutex_lock(&pw_lock);
    if (pw_out) {
        fclose(pw_out);
        pw_out = NULL;
    }
    pthread_mutex_unlock(&pw_lock);
}

int InitializeInjection(void)
{
    if (pw_initialized)
        return 1;
    pw_initialized = 1;
    const char *path = getenv("PW_CUPTI_OUT");
    if (path == NULL || *path == '\0') {
        fprintf(stderr, "pw-cupti: PW_CUPTI_OUT is not set; not tracing\n");
        return 1;
    }
    pw_out = fopen(path, "w");
    if (pw_out == NULL) {
        fprintf(stderr, "pw-cupti: cannot open %s for writing\n", path);
        return 1;
    }
    pw_demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (pw_demangle == NULL) {
        void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        if (h)
            pw_demangle = (demangle_fn)dlsym(h, "__cxa_demangle");
    }
    CUptiResult r = cuptiActivityRegisterCallbacks(pw_buffer_requested, pw_buffer_completed);
    if (r != CUPTI_SUCCESS) {
        pw_warn("cuptiActivityRegisterCallbacks", r);
        return 1;
    }
    const CUpti_ActivityKind kinds[] = {
        CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
        CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_RUNTIME,
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        r = cuptiActivityEnable(kinds[i]);
        if (r != CUPTI_SUCCESS)
            pw_warn("cuptiActivityEnable", r);
    }
    atexit(pw_at_exit);
    return 1;
}
