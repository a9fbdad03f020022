/* blockdev.h - the file/device block backend of bqos-node: one sparse file
 * per export in a directory (or one file or device shared by every export),
 * pread/pwrite/fdatasync/fallocate on a pool of worker threads (with
 * O_DIRECT, aligned reads and writes as kernel AIO instead), completions
 * handed back to a libevent loop thread (the pool is workpool.h).
 *
 * Threads: blockdev_new(), blockdev_export(), blockdev_submit() and
 * blockdev_destroy() are called on the loop thread that owns the event_base;
 * the workers only touch the operations they run and the (read-only after
 * opening) file descriptors.  Completions run on the loop thread, in the
 * order the workers finish them. */
#ifndef BQOS_BLOCKDEV_H
#define BQOS_BLOCKDEV_H

#include <stddef.h>
#include <stdint.h>

#include "storage-node/io/workpool.h"

struct event_base;

typedef enum {
    BLOCKDEV_READ = 0,
    BLOCKDEV_WRITE = 1,
    BLOCKDEV_FLUSH = 2,   /* fdatasync of the export's file */
    BLOCKDEV_TRIM = 3,    /* punch a hole; success where holes are unsupported */
    BLOCKDEV_EXTENTS = 4  /* map [offset, offset+length) to extents, see
                             blockdev_extents() */
} blockdev_kind_t;

#define BLOCKDEV_EXT_HOLE (1u << 0)  /* not allocated (reads as zeroes) */

/* One extent of an export: `length` bytes (nonzero) that are all data
 * (flags 0) or all hole (BLOCKDEV_EXT_HOLE). */
typedef struct {
    uint32_t length;
    uint32_t flags;
} blockdev_extent_t;

/* One IO.  The caller owns the memory and fills the request part; between
 * blockdev_submit() and the completion callback the backend owns it. */
typedef struct blockdev_op {
    workpool_item_t link;      /* backend's while submitted */
    blockdev_kind_t kind;
    int fua;                   /* WRITE: durable before completion */
    int export_id;             /* as given to blockdev_export() */
    uint64_t offset;
    uint32_t length;
    void *buf;                 /* READ: filled; WRITE: source; EXTENTS: an
                                  array of max_extents blockdev_extent_t;
                                  caller-owned */
    uint32_t max_extents;      /* EXTENTS: capacity of buf (>= 1) */
    uint32_t nextents;         /* EXTENTS: set with result 0, >= 1 */
    int result;                /* set by the worker: 0 or -errno.  A short
                                  read/write is retried, never reported as
                                  success. */
} blockdev_op_t;

/* The data completed op `op` moved: a READ's or WRITE's length when it
 * succeeded, else 0 (for the metrics). */
uint64_t blockdev_op_bytes(const blockdev_op_t *op);

/* Called on the loop thread for every completed op; the caller owns it again. */
typedef void (*blockdev_done_fn)(blockdev_op_t *op, void *arg);

typedef struct {
    const char *path;      /* directory: one file per export, NAME.img,
                              created 0600 and sized to export_size; an
                              existing one must be a plain file (no symbolic
                              link, one hard link) and keeps its size unless
                              empty; regular file or block device: shared by
                              all */
    uint64_t export_size;  /* size of each per-export file (directory mode),
                              or of a new/empty single file; > 0 */
    int direct;            /* also open with O_DIRECT: 4 KiB-aligned READs and
                              non-FUA WRITEs go to kernel AIO, the rest to
                              the buffered descriptor and the pool */
    int workers;           /* worker threads = IOs at the device at once, >= 1 */
    int max_exports;       /* largest export id + 1 accepted, >= 1 */
    uint32_t io_time_us;   /* EXPERIMENT HOOK: each IO keeps its worker busy
                              at least this long (emulates a slower device,
                              so that servers sharing one machine have a
                              fixed capacity of workers / io_time); 0: off */
} blockdev_config_t;

typedef struct blockdev blockdev_t;

/* Checks the path (creating nothing yet), starts the workers and registers
 * the completion event on `base`.  Returns the backend (caller owns it), or
 * NULL and *err = -EINVAL (bad settings), -ENOENT/-EACCES/... from stat or
 * open, -ENOMEM. */
blockdev_t *blockdev_new(struct event_base *base, const blockdev_config_t *cfg,
                         blockdev_done_fn done, void *arg, int *err);

/* Opens (creating a sparse file of export_size if needed, directory mode)
 * the backing store of export `id` named `name` (1..250 bytes, no '/', not
 * "." or ".."), once; later calls return the cached result.  Sets *size to
 * the export's size in bytes.  Returns 0, -EINVAL (bad id or name), or
 * -errno from open/ftruncate/fstat.  Loop thread; blocks briefly. */
int blockdev_export(blockdev_t *bd, int id, const char *name, uint64_t *size);

/* Queues `op` for a worker (its export must have been opened); with
 * O_DIRECT an aligned READ or non-FUA WRITE is instead gathered for kernel
 * AIO and submitted, with the others gathered in the same loop iteration,
 * once the loop's current callbacks are done.  Returns 0, -EINVAL
 * (unopened export), or -ESHUTDOWN while being destroyed. */
int blockdev_submit(blockdev_t *bd, blockdev_op_t *op);

/* Tries to run a READ at once on the calling (loop) thread without
 * blocking: preadv2(RWF_NOWAIT) succeeds only if every byte is in the page
 * cache.  Returns 1 if the op is complete (op->result set; no callback will
 * run), 0 if it must be submitted (nothing changed but possibly op->buf).
 * Never for writes, O_DIRECT reads, with io_time_us, or where RWF_NOWAIT
 * is unsupported. */
int blockdev_try_inline(blockdev_t *bd, blockdev_op_t *op);

/* Maps [offset, offset+length) of export `id` (opened, length > 0, inside
 * the export) to at most `max` (>= 1) consecutive extents starting at
 * `offset`, alternating data and hole, with lseek(SEEK_DATA/SEEK_HOLE) on a
 * regular file.  The extents may stop short of offset+length when `max`
 * runs out, never go beyond it.  Where holes cannot be seen (a block
 * device, a file system without SEEK_DATA) the whole range is one data
 * extent.  Returns the number of extents (>= 1), or -EINVAL (bad
 * arguments) or -errno from lseek.  Thread-safe (uses no file offset
 * state that pread/pwrite rely on); blocks on file-system metadata, so a
 * worker runs it for a BLOCKDEV_EXTENTS op. */
int blockdev_extents(blockdev_t *bd, int id, uint64_t offset, uint32_t length,
                     blockdev_extent_t *ext, uint32_t max);

/* Returns nonzero if the backend was opened with O_DIRECT (buffers, offsets
 * and lengths must then be aligned to 4096 bytes, see blockdev_alloc()). */
int blockdev_direct(const blockdev_t *bd);

/* Allocates an IO buffer of len bytes suitable for the backend (4096-byte
 * aligned).  Returns NULL if out of memory; free with free(). */
void *blockdev_alloc(size_t len);

/* Stops the workers after their current op, delivers every completion
 * still pending (callbacks run here, on the loop thread), closes the files
 * and frees the backend; ops never started complete with -ESHUTDOWN.  Sets
 * *bdp to NULL.  Accepts NULL. */
void blockdev_destroy(blockdev_t **bdp);

#endif
