/*
 * mpi_allgather_perf: the MPI_Allgather counterpart of bin/allgather-perf, so the
 * two tables can be compared column by column. A benchmark only: the project
 * does not depend on MPI.
 *
 * Same method as allgather-perf: per size, warmup + iters MPI_Allgather calls on
 * MPI_BYTE; each iteration refills the input (untimed) with the same rank-,
 * iteration- and offset-dependent pattern, then all-gathers 8 bytes as a
 * barrier; each rank times each call; per-rank
 * times are all-gathered afterwards and the reported time is the median over
 * iterations of the maximum over ranks. Every byte of every rank's output is
 * checked against the last iteration's pattern and wrong bytes are summed.
 *
 * Build: mpicc -O2 -Wall -Wextra -Werror -o mpi_allgather_perf mpi_allgather_perf.c
 * Run:   mpirun -np 2 ./mpi_allgather_perf [--min-bytes 64K] [--max-bytes 64M]
 *            [--iters 20] [--warmup 5] [--csv]
 */
#include <errno.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint64_t min_bytes;
  uint64_t max_bytes;
  int iters;
  int warmup;
  int csv;
} options_t;

static int parse_size(const char* text, uint64_t* out) {
  char* end = NULL;
  unsigned long long v;
  int shift = 0;
  if (text[0] < '0' || text[0] > '9') return 0;
  errno = 0;
  v = strtoull(text, &end, 10);
  if (errno != 0) return 0;
  if (strcmp(end, "K") == 0 || strcmp(end, "k") == 0) {
    shift = 10;
  } else if (strcmp(end, "M") == 0 || strcmp(end, "m") == 0) {
    shift = 20;
  } else if (strcmp(end, "G") == 0 || strcmp(end, "g") == 0) {
    shift = 30;
  } else if (*end != '\0') {
    return 0;
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) return 0;
  *out = (uint64_t)v << shift;
  return *out > 0;
}

static int parse_int(const char* text, int lo, int* out) {
  char* end = NULL;
  long v;
  if (text[0] < '0' || text[0] > '9') return 0;
  errno = 0;
  v = strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > 1000000) return 0;
  *out = (int)v;
  return 1;
}

/* Returns 0 when ok, 2 on a usage error (printed by rank 0 only). */
static int parse_options(int argc, char** argv, int rank, options_t* o) {
  int i;
  o->min_bytes = 64ull << 10;
  o->max_bytes = 64ull << 20;
  o->iters = 20;
  o->warmup = 5;
  o->csv = 0;
  for (i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = 1;
    if (strcmp(a, "--csv") == 0) {
      o->csv = 1;
      continue;
    }
    if (strcmp(a, "--help") == 0) {
      if (rank == 0) {
        printf(
            "usage: mpirun -np N mpi_allgather_perf [--min-bytes SIZE] [--max-bytes SIZE]\n"
            "       [--iters N] [--warmup N] [--csv]   (SIZE: bytes, K/M/G suffix)\n");
      }
      return 1;
    }
    if (v == NULL) {
      if (rank == 0) fprintf(stderr, "mpi_allgather_perf: unknown option or missing value: %s\n", a);
      return 2;
    }
    if (strcmp(a, "--min-bytes") == 0) {
      ok = parse_size(v, &o->min_bytes);
    } else if (strcmp(a, "--max-bytes") == 0) {
      ok = parse_size(v, &o->max_bytes);
    } else if (strcmp(a, "--iters") == 0) {
      ok = parse_int(v, 1, &o->iters);
    } else if (strcmp(a, "--warmup") == 0) {
      ok = parse_int(v, 0, &o->warmup);
    } else {
      if (rank == 0) fprintf(stderr, "mpi_allgather_perf: unknown option %s\n", a);
      return 2;
    }
    if (!ok) {
      if (rank == 0) fprintf(stderr, "mpi_allgather_perf: invalid value '%s' for %s\n", v, a);
      return 2;
    }
    ++i;
  }
  if (o->min_bytes > o->max_bytes) {
    if (rank == 0) fprintf(stderr, "mpi_allgather_perf: --min-bytes exceeds --max-bytes\n");
    return 2;
  }
  return 0;
}

/* The pattern of allgather_perf.cc, byte for byte. */
static uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static uint64_t pattern_base(int rank, int iter) { return mix64(((uint64_t)rank << 32) ^ (uint64_t)iter); }

static inline uint64_t pattern_word(uint64_t base, uint64_t j) { return base + j * 0xD1B54A32D192ED03ull; }

static inline uint8_t pattern_byte(uint64_t base, uint64_t k) {
  return (uint8_t)(pattern_word(base, k / 8) >> (8 * (k % 8)));
}

static void fill_pattern(uint8_t* dst, uint64_t bytes, int rank, int iter) {
  const uint64_t base = pattern_base(rank, iter);
  const uint64_t words = bytes / 8;
  uint64_t j, k;
  int b;
  for (j = 0; j < words; ++j) {
    uint64_t w = pattern_word(base, j);
    for (b = 0; b < 8; ++b) dst[j * 8 + b] = (uint8_t)(w >> (8 * b));
  }
  for (k = words * 8; k < bytes; ++k) dst[k] = pattern_byte(base, k);
}

static uint64_t count_wrong(const uint8_t* got, uint64_t bytes, int rank, int iter) {
  const uint64_t base = pattern_base(rank, iter);
  const uint64_t words = bytes / 8;
  uint64_t wrong = 0, j, k;
  int b;
  for (j = 0; j < words; ++j) {
    uint64_t w = pattern_word(base, j), g = 0;
    for (b = 0; b < 8; ++b) g |= (uint64_t)got[j * 8 + b] << (8 * b);
    if (g != w) {
      for (b = 0; b < 8; ++b) wrong += (((g ^ w) >> (8 * b)) & 0xff) ? 1 : 0;
    }
  }
  for (k = words * 8; k < bytes; ++k) wrong += got[k] != pattern_byte(base, k) ? 1 : 0;
  return wrong;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

int main(int argc, char** argv) {
  int rank = 0, size = 1, rc, it, i, src;
  int any_wrong = 0;
  options_t o;
  uint8_t *send, *recv;
  int64_t *mine, *all, *tokens;
  int64_t token;
  double* slowest;
  uint64_t bytes;
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int version_len = 0;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  rc = parse_options(argc, argv, rank, &o);
  if (rc != 0) {
    MPI_Finalize();
    return rc == 1 ? 0 : 2;
  }
  if (o.max_bytes * (uint64_t)size > (uint64_t)INT32_MAX) {
    if (rank == 0) fprintf(stderr, "mpi_allgather_perf: --max-bytes * ranks exceeds an int count\n");
    MPI_Finalize();
    return 2;
  }

  send = (uint8_t*)malloc(o.max_bytes);
  recv = (uint8_t*)malloc(o.max_bytes * (uint64_t)size);
  mine = (int64_t*)malloc(sizeof(int64_t) * (size_t)(o.iters + 1));
  all = (int64_t*)malloc(sizeof(int64_t) * (size_t)(o.iters + 1) * (size_t)size);
  slowest = (double*)malloc(sizeof(double) * (size_t)o.iters);
  tokens = (int64_t*)malloc(sizeof(int64_t) * (size_t)size);
  token = rank;
  if (!send || !recv || !mine || !all || !slowest || !tokens) {
    fprintf(stderr, "mpi_allgather_perf: rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(send, 0, o.max_bytes); /* touch the pages before timing */
  memset(recv, 0, o.max_bytes * (uint64_t)size);

  if (rank == 0) {
    char* nl;
    MPI_Get_library_version(version, &version_len);
    nl = strchr(version, '\n');
    if (nl) *nl = '\0';
    nl = strchr(version, ',');
    if (nl) *nl = '\0';
    printf("# mpi_allgather_perf: %s, ranks %d, MPI_Allgather on MPI_BYTE\n", version, size);
    printf("# sizes %" PRIu64 "..%" PRIu64
           " B/rank, iters %d, warmup %d; time = median over "
           "iters of max over ranks\n",
           o.min_bytes, o.max_bytes, o.iters, o.warmup);
    if (o.csv) {
      printf("size_bytes_per_rank,count,type,time_us,algbw_gbps,busbw_gbps,wrong\n");
    } else {
      printf("%14s %12s %8s %12s %12s %12s %8s\n", "size(B/rank)", "count", "type", "time(us)", "algbw(GB/s)",
             "busbw(GB/s)", "#wrong");
    }
    fflush(stdout);
  }

  for (bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
    const int total = o.warmup + o.iters;
    uint64_t wrong = 0, wrong_total = 0;
    double t_us, algbw, busbw;
    for (it = 0; it < total; ++it) {
      double t0, t1;
      fill_pattern(send, bytes, rank, it);
      /* The same 8-byte all-gather barrier as allgather-perf's. */
      MPI_Allgather(&token, 1, MPI_INT64_T, tokens, 1, MPI_INT64_T, MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      rc = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
      t1 = MPI_Wtime();
      if (rc != MPI_SUCCESS) {
        fprintf(stderr, "mpi_allgather_perf: rank %d: MPI_Allgather failed (%d)\n", rank, rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      if (it >= o.warmup) mine[it - o.warmup] = (int64_t)((t1 - t0) * 1e9);
    }
    for (src = 0; src < size; ++src) {
      wrong += count_wrong(recv + (uint64_t)src * bytes, bytes, src, total - 1);
    }
    if (wrong != 0) {
      fprintf(stderr, "mpi_allgather_perf: rank %d: %" PRIu64 " wrong bytes at %" PRIu64 " B/rank\n", rank, wrong,
              bytes);
    }
    mine[o.iters] = (int64_t)wrong;
    MPI_Allgather(mine, o.iters + 1, MPI_INT64_T, all, o.iters + 1, MPI_INT64_T, MPI_COMM_WORLD);
    for (i = 0; i < o.iters; ++i) slowest[i] = 0.0;
    for (src = 0; src < size; ++src) {
      const int64_t* row = all + (size_t)src * (size_t)(o.iters + 1);
      for (i = 0; i < o.iters; ++i) {
        if (row[i] / 1e3 > slowest[i]) slowest[i] = row[i] / 1e3;
      }
      wrong_total += (uint64_t)row[o.iters];
    }
    t_us = median(slowest, o.iters);
    algbw = t_us > 0 ? (double)bytes * size / (t_us * 1e3) : 0.0;
    busbw = algbw * (size - 1) / size;
    if (wrong_total != 0) any_wrong = 1;
    if (rank == 0) {
      if (o.csv) {
        printf("%" PRIu64 ",%" PRIu64 ",uint8,%.2f,%.3f,%.3f,%" PRIu64 "\n", bytes, bytes, t_us, algbw, busbw,
               wrong_total);
      } else {
        printf("%14" PRIu64 " %12" PRIu64 " %8s %12.2f %12.3f %12.3f %8" PRIu64 "\n", bytes, bytes, "uint8", t_us,
               algbw, busbw, wrong_total);
      }
      fflush(stdout);
    }
    if (bytes > o.max_bytes / 2) break;
  }

  free(send);
  free(recv);
  free(mine);
  free(all);
  free(slowest);
  free(tokens);
  MPI_Finalize();
  return any_wrong ? 1 : 0;
}
