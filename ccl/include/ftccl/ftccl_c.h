/* C API of ftccl, for callers that cannot use C++ (and for FFI). Thin wrapper over the C++
 * Communicator: same semantics, same deadlines; every function returns an ftcclResult and, on
 * failure, ftcclLastError() gives the message (thread-local). Buffers follow the C++ layouts
 * documented in ftccl/communicator.h. timeout_ms 0 means the communicator's default. */
#ifndef FTCCL_FTCCL_C_H_
#define FTCCL_FTCCL_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  ftcclSuccess = 0,
  ftcclInvalidArgument,
  ftcclTimeout,
  ftcclNetworkError,
  ftcclPeerLost,
  ftcclMismatch,
  ftcclCorrupt,
  ftcclAborted,
  ftcclInternalError,
} ftcclResult;

typedef enum { ftcclF32 = 0, ftcclF64, ftcclF16, ftcclBF16, ftcclI32, ftcclI64, ftcclU8 } ftcclDataType;
typedef enum { ftcclSum = 0, ftcclProd, ftcclMin, ftcclMax, ftcclAvg } ftcclRedOp;

typedef struct ftcclComm* ftcclComm_t;

/* rails: `num_rails` IPv4 addresses or interface names. */
ftcclResult ftcclCommInit(ftcclComm_t* comm, int rank, int size, const char* bootstrap,
                          const char* const* rails, int num_rails, uint32_t init_timeout_ms);
/* Always succeeds; aborts pending work. NULL is ignored. */
void ftcclCommDestroy(ftcclComm_t comm);

ftcclResult ftcclAllReduce(ftcclComm_t comm, const void* send, void* recv, size_t count,
                           ftcclDataType dt, ftcclRedOp op, uint32_t timeout_ms);
ftcclResult ftcclAllGather(ftcclComm_t comm, const void* send, void* recv, size_t count,
                           ftcclDataType dt, uint32_t timeout_ms);
ftcclResult ftcclReduceScatter(ftcclComm_t comm, const void* send, void* recv, size_t count,
                               ftcclDataType dt, ftcclRedOp op, uint32_t timeout_ms);
ftcclResult ftcclBroadcast(ftcclComm_t comm, const void* send, void* recv, size_t count,
                           ftcclDataType dt, int root, uint32_t timeout_ms);
ftcclResult ftcclReduce(ftcclComm_t comm, const void* send, void* recv, size_t count,
                        ftcclDataType dt, ftcclRedOp op, int root, uint32_t timeout_ms);
ftcclResult ftcclAllToAll(ftcclComm_t comm, const void* send, void* recv, size_t count,
                          ftcclDataType dt, uint32_t timeout_ms);
ftcclResult ftcclBarrier(ftcclComm_t comm, uint32_t timeout_ms);

/* This rank and the group's size (-1 for NULL). */
int ftcclCommRank(ftcclComm_t comm);
int ftcclCommSize(ftcclComm_t comm);

/* Revoke (Communicator::Revoke): the running, queued and later collectives end with
 * ftcclAborted ("communicator revoked: <reason>"), here and on every peer a path reaches; the
 * communicator is then good only for ftcclCommShrink and ftcclCommDestroy. */
ftcclResult ftcclCommRevoke(ftcclComm_t comm, const char* reason);
/* The rank whose loss failed the communicator (Communicator::LostPeer): what every survivor
 * passes to ftcclCommShrink; -1 when none (or NULL); this rank when the others lost it. */
int ftcclCommLostPeer(ftcclComm_t comm);
/* Shrink (Communicator::Shrink): *newcomm = a communicator of the ranks not in `excluded`,
 * renumbered in their old order, over the same rails and options, within timeout_ms (0: the
 * init timeout). Every survivor calls it with the same set; `comm` is revoked first and must
 * still be destroyed. On failure *newcomm is NULL. */
ftcclResult ftcclCommShrink(ftcclComm_t comm, const int* excluded, int num_excluded,
                            uint32_t timeout_ms, ftcclComm_t* newcomm);

/* The message of the last failed call on this thread ("" if none). */
const char* ftcclLastError(void);
const char* ftcclResultString(ftcclResult r);

#ifdef __cplusplus
}
#endif

#endif /* FTCCL_FTCCL_C_H_ */
