#include <uv.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* sendmmsg(2) and recvmmsg(2) are GNU extensions: Swift's Glibc module is built without
   _GNU_SOURCE, and defining it here clashes with that module's definitions. So the layout of
   glibc's struct mmsghdr is spelled out (a msghdr, then the byte count the call fills in) and
   the calls go through syscall(2), which sets errno like the glibc wrappers. */
typedef struct {
    struct msghdr msg_hdr;
    unsigned int msg_len;
} inkuv_mmsghdr;

static inline int inkuv_sendmmsg(int fd, inkuv_mmsghdr *messages, unsigned int count, int flags) {
    return (int)syscall(SYS_sendmmsg, fd, messages, count, flags);
}

static inline int inkuv_recvmmsg(int fd, inkuv_mmsghdr *messages, unsigned int count, int flags,
                                 struct timespec *timeout) {
    return (int)syscall(SYS_recvmmsg, fd, messages, count, flags, timeout);
}
