/*
 * cuda_cache.h: the persistent compiled-kernel cache on disk.
 *
 * The seed keeps a Metal binary archive so that a warm start skips the shader
 * compiler; this is ours for CUBINs. One file per entry, named by the hash of
 * its key (the key holds the source hash, the compile options, the NVRTC and
 * driver versions and the GPU architecture, so a change to any recompiles).
 * Entries are written to a private temporary file and renamed into place, so
 * a crash leaves nothing half-written and two processes may fill the cache at
 * once; each entry carries its key and a checksum, so a damaged or colliding
 * entry reads as a miss (with a warning) and is rewritten. The folder is kept
 * under a size cap by evicting the least recently used entries (a hit touches
 * the file's mtime). Nothing here is ever fatal to the caller: a cache that
 * cannot be opened or written only costs compile time.
 *
 * Independent of CUDA so it can be tested anywhere.
 */
#ifndef TG_CUDA_CACHE_H
#define TG_CUDA_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg.h"

typedef struct tg_kcache tg_kcache;

typedef struct tg_kcache_stats {
    int hits, misses, corrupt, writes, evictions;
} tg_kcache_stats;

/* Opens (creating) the cache folder dir with a cap of max_bytes (0: 256 MiB).
 * Free with tg_kcache_close. */
tg_status tg_kcache_open(const char *dir, size_t max_bytes, tg_kcache **out_cache);
/* Opens the cache the environment asks for: CT_CUDA_CACHE=0 disables it
 * (*out_cache = NULL, returns NULL); CT_CUDA_CACHE_DIR moves it (default
 * $XDG_CACHE_HOME/cohere-transcribe/cuda, else ~/.cache/...); CT_CUDA_CACHE_MAX_MB
 * caps it. A folder that cannot be made is a warning and a NULL cache. */
void tg_kcache_open_default(tg_kcache **out_cache);
/* Accepts NULL. */
void tg_kcache_close(tg_kcache *cache);

/* On a hit returns true and a new copy of the entry in *out_data (the caller
 * frees it with tg_free). A damaged entry is removed, warned about and counted
 * as corrupt; a NULL cache always misses. */
bool tg_kcache_get(tg_kcache *cache, const char *key, void **out_data, size_t *out_size);
/* Stores an entry (replacing any), then evicts down to the cap. Errors are
 * returned for the caller to log; the cache stays usable. NULL cache: no-op. */
tg_status tg_kcache_put(tg_kcache *cache, const char *key, const void *data, size_t size);

const char *tg_kcache_dir(const tg_kcache *cache);
tg_kcache_stats tg_kcache_get_stats(const tg_kcache *cache);
/* The file name an entry for key has inside the folder (tests damage it). */
void tg_kcache_entry_path(const tg_kcache *cache, const char *key, char *out, size_t out_size);

#endif /* TG_CUDA_CACHE_H */
