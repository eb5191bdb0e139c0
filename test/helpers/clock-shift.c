/*
 * Preloaded into a redis-server by redis-clock.ts: the server's wall clock (clock_gettime's
 * CLOCK_REALTIME, gettimeofday, time) is the real one plus an offset the test sets, so Redis's TIME
 * and its key expiry move forward together, at once. libfaketime does the same but deadlocks at
 * start with the jemalloc Redis is linked with (both call each other while initialising); this shim
 * allocates nothing and asks the kernel directly.
 *
 * The offset is read from a file mapped at start ($CLOCK_SHIFT_FILE, 16 bytes): a sequence number
 * (odd while the test writes) and the offset in ms, both little-endian, so a read never sees half a
 * write (a seqlock).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct shift {
  uint32_t seq;
  uint32_t pad;
  int64_t offset_ms;
};

static const struct shift *shared;

__attribute__((constructor)) static void map_shift(void) {
  const char *path = getenv("CLOCK_SHIFT_FILE");
  if (!path) return;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  void *p = mmap(NULL, sizeof(struct shift), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p != MAP_FAILED) shared = p;
}

static int64_t offset_ms(void) {
  if (!shared) return 0;
  for (;;) {
    uint32_t before = __atomic_load_n(&shared->seq, __ATOMIC_ACQUIRE);
    int64_t offset = __atomic_load_n(&shared->offset_ms, __ATOMIC_ACQUIRE);
    uint32_t after = __atomic_load_n(&shared->seq, __ATOMIC_ACQUIRE);
    if (before == after && !(before & 1)) return offset;
  }
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  long r = syscall(SYS_clock_gettime, id, ts);
  if (r != 0 || (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE)) return (int)r;
  int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + offset_ms() * 1000000;
  ts->tv_sec = ns / 1000000000;
  ts->tv_nsec = ns % 1000000000;
  return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  (void)tz;
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
  // glibc declares tv non-null.
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

time_t time(time_t *out) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}
