/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_smb - what the SMB trace writer costs per packet on its own: small
 * packets, about the size of one ftrace event, into a 2 MiB buffer of
 * 32 KiB chunks whose "service" frees every committed chunk at once, so
 * only the writer (pbw encoding, chunk switches, fragment headers) is
 * measured.  Needs neither root nor tracefs.
 *
 *   bench_smb [-n PACKETS] [-r REPS] [--rows]
 *
 * Each rep writes PACKETS packets (default 2,000,000); the cheapest rep of
 * REPS (default 5) in CLOCK_PROCESS_CPUTIME_ID is printed.  --rows prints
 * only the bench/run.sh table row and note.  Not a test: asserts nothing.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench/bench.h"
#include "protos/pbw.h"
#include "smb/smb.h"
#include "util/util.h"

#define SMB_SIZE (2u << 20)
#define SMB_PAGE (32u << 10)
#define TARGET_BUFFER 1

static unsigned long arg_packets = 2000000;
static unsigned arg_reps = 5;
static bool arg_rows;

struct shm {
	int fd;
	uint8_t *svc;
	struct smb *smb;
};

/* A service that frees every committed chunk at once. */
static void free_all_hook(void *userdata)
{
	struct shm *m = userdata;
	struct smb_commit cm;

	(void)smb_take_commit(m->smb, &cm);
	for (size_t i = 0; i < cm.n_moves; i++)
		__atomic_store_n((uint32_t *)(m->svc + (size_t)cm.moves[i].page * SMB_PAGE), 0,
				 __ATOMIC_RELEASE);
}

static int shm_open_smb(struct shm *m)
{
	int r;

	m->fd = memfd_create("bench-smb", MFD_CLOEXEC);
	if (m->fd < 0)
		return -errno;
	if (ftruncate(m->fd, SMB_SIZE) < 0)
		return -errno;
	m->svc = mmap(NULL, SMB_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
	if (m->svc == MAP_FAILED)
		return -errno;
	r = smb_new_from_fd(m->fd, SMB_PAGE, &m->smb);
	if (r < 0)
		return r;
	smb_set_commit_hook(m->smb, free_all_hook, m);
	return 0;
}

static void shm_close(struct shm *m)
{
	m->smb = smb_free(m->smb);
	if (m->svc && m->svc != MAP_FAILED)
		(void)munmap(m->svc, SMB_SIZE);
	if (m->fd >= 0)
		close(m->fd);
}

/* One rep: @n packets through a fresh writer.  Returns: CPU ns, or 0 on error. */
static uint64_t write_packets(struct shm *m, uint16_t writer_id, unsigned long n,
			      struct smb_writer_stats *ret)
{
	struct smb_writer *w;
	uint64_t t0, t1;

	if (smb_writer_new(m->smb, writer_id, TARGET_BUFFER, &w) < 0)
		return 0;
	t0 = bench_process_cpu_ns();
	for (unsigned long i = 0; i < n; i++) {
		struct pbw *p = smb_writer_begin_packet(w);

		/* about the size of one small ftrace event */
		pbw_varint(p, 8, 1000000000ull + i);
		pbw_begin_nested(p, 1);
		pbw_varint(p, 1, i & 3);
		pbw_varint(p, 2, i);
		pbw_string(p, 3, "kworker/1:2");
		(void)pbw_end_nested(p);
		(void)smb_writer_end_packet(w);
	}
	t1 = bench_process_cpu_ns();
	smb_writer_get_stats(w, ret);
	w = smb_writer_free(w);
	return t1 - t0;
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rows", no_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	int c;

	while ((c = getopt_long(argc, argv, "n:r:h", opts, NULL)) >= 0) {
		uint32_t v;

		switch (c) {
		case 'n':
			if (safe_atou32(optarg, &v) < 0 || v == 0)
				return -EINVAL;
			arg_packets = v;
			break;
		case 'r':
			if (safe_atou32(optarg, &v) < 0 || v == 0)
				return -EINVAL;
			arg_reps = v;
			break;
		case 'R':
			arg_rows = true;
			break;
		default:
			return -EINVAL;
		}
	}
	return optind == argc ? 0 : -EINVAL;
}

int main(int argc, char **argv)
{
	struct shm m = { .fd = -EBADF };
	struct smb_writer_stats ws = {}, best_ws = {};
	struct bench_row row = BENCH_ROW_EMPTY("smb writer alone (small packets)");
	uint64_t best = UINT64_MAX;
	int r;

	if (parse_args(argc, argv) < 0) {
		fprintf(stderr, "usage: bench_smb [-n PACKETS] [-r REPS] [--rows]\n");
		return EXIT_FAILURE;
	}
	r = shm_open_smb(&m);
	if (r < 0) {
		fprintf(stderr, "bench_smb: shared memory buffer: %s\n", strerror(-r));
		shm_close(&m);
		return EXIT_FAILURE;
	}
	for (unsigned rep = 0; rep < arg_reps; rep++) {
		uint64_t ns = write_packets(&m, (uint16_t)(rep + 1), arg_packets, &ws);

		if (ns == 0 || ws.packets_written != arg_packets || ws.packets_dropped) {
			fprintf(stderr, "bench_smb: rep %u wrote %llu of %lu packets\n", rep,
				(unsigned long long)ws.packets_written, arg_packets);
			shm_close(&m);
			return EXIT_FAILURE;
		}
		if (ns < best) {
			best = ns;
			best_ws = ws;
		}
	}
	shm_close(&m);

	row.ns_per_event = (double)best / (double)arg_packets;
	row.events_per_s = 1e9 / row.ns_per_event;
	row.bytes_per_event = (double)best_ws.bytes_written / (double)arg_packets;
	if (!arg_rows)
		bench_table_header(stdout);
	bench_row_print(stdout, &row);
	bench_note(stdout, "smb writer: %lu packets of %.1f bytes per rep, %llu chunks of 32 KiB, "
		   "best of %u reps",
		   arg_packets, row.bytes_per_event, (unsigned long long)best_ws.chunks_acquired,
		   arg_reps);
	return EXIT_SUCCESS;
}
