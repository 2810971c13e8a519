/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Shared fixtures of the SMB suites (test_smb, test_smb_abi): a seeded
 * random source, a memfd mapped once by the producer's smb and once by the
 * "service", and the fields the writer puts before a packet's own.
 */

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "smb/smb.h"
#include "util/util_varint.h"

#define KIB 1024u
#define MIB (1024u * 1024u)
#define TARGET_BUFFER 7

struct rng {
	uint64_t s;
};

static inline uint64_t rng_next(struct rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545F4914F6CDD1Dull;
}

static inline void rng_fill(struct rng *r, uint8_t *p, size_t n)
{
	while (n >= 8) {
		uint64_t v = rng_next(r);

		memcpy(p, &v, 8);
		p += 8;
		n -= 8;
	}
	if (n) {
		uint64_t v = rng_next(r);

		memcpy(p, &v, n);
	}
}

/* A memfd mapped twice: once by the producer (smb), once by the "service". */
struct shm {
	int fd;
	size_t size;
	size_t page_size;
	uint8_t *svc;
	struct smb *smb;
};

static inline void shm_setup(struct shm *m, size_t size, size_t page_size)
{
	m->fd = memfd_create("test-smb", MFD_CLOEXEC);
	ck_assert_int_ge(m->fd, 0);
	ck_assert_int_eq(ftruncate(m->fd, (off_t)size), 0);
	m->size = size;
	m->page_size = page_size;
	m->svc = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
	ck_assert_ptr_ne(m->svc, MAP_FAILED);
	ck_assert_int_eq(smb_new_from_fd(m->fd, page_size, &m->smb), 0);
	ck_assert_uint_eq(smb_size(m->smb), size);
	ck_assert_uint_eq(smb_num_chunks(m->smb), size / page_size);
}

static inline void shm_teardown(struct shm *m)
{
	m->smb = smb_free(m->smb);
	ck_assert_int_eq(munmap(m->svc, m->size), 0);
	close(m->fd);
}

static inline struct smb_reader *reader_for(struct shm *m, size_t max_bytes)
{
	struct smb_reader *r;

	ck_assert_int_eq(smb_reader_new(m->svc, m->size, m->page_size, max_bytes, &r), 0);
	ck_assert_int_eq(smb_reader_allow_buffer(r, TARGET_BUFFER), 0);
	return r;
}

static inline uint32_t page_word(const struct shm *m, size_t page)
{
	uint32_t v;

	memcpy(&v, m->svc + page * m->page_size, 4);
	return v;
}

/* The fields the writer puts first: previous_packet_dropped (42), first_packet_on_sequence (87). */
struct prefix {
	size_t len;
	bool has_dropped;
	uint64_t dropped;
	bool has_first;
	uint64_t idx;             /* field 8, right after the prefix */
	bool has_idx;
};

static inline struct prefix parse_prefix(const uint8_t *p, size_t len)
{
	struct prefix x = {};
	const uint8_t *q = p, *end = p + len;
	uint64_t tag, v;

	for (;;) {
		size_t at = (size_t)(q - p);

		if (!varint_get(&q, end, &tag) || (tag & 7) != 0 || !varint_get(&q, end, &v))
			return x;
		if (tag >> 3 == 42) {
			x.has_dropped = true;
			x.dropped = v;
		} else if (tag >> 3 == 87) {
			x.has_first = true;
		} else if (tag >> 3 == 8) {
			x.len = at;
			x.has_idx = true;
			x.idx = v;
			return x;
		} else {
			return x;
		}
	}
}

/* What a reader delivered: packet indices and how their loss was flagged. */
struct lossy_check {
	uint32_t *got;
	size_t n_got;
	bool *has_dropped_field;
	uint32_t *reader_flag;
	uint32_t *dropped_value;
	bool bad;
};

static inline int collect(const struct smb_packet *p, void *userdata)
{
	struct lossy_check *l = userdata;
	struct prefix x = parse_prefix(p->data, p->len);

	if (!x.has_idx) {
		l->bad = true;
		return 0;
	}
	l->got[l->n_got] = (uint32_t)x.idx;
	l->has_dropped_field[l->n_got] = x.has_dropped;
	l->dropped_value[l->n_got] = (uint32_t)x.dropped;
	l->reader_flag[l->n_got] = p->previous_packet_dropped;
	l->n_got++;
	return 0;
}
