/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as what an untrusted producer hands the
 * service-side SMB reader.  The input is a list of records
 *   [kind:u8][len:u16 LE][len bytes]
 * where kind % 4 picks: 0 a whole chunk for smb_reader_move_bytes() (bit 2
 * of kind picks the target buffer), 1 a patch, 2 a non-final read, 3 the
 * raw contents of a small shared buffer whose every page/chunk is then
 * moved with smb_reader_move().  Input that is not a well-formed record list
 * is fed whole as a single chunk.  Every run ends with a final read.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "smb/smb.h"

#define PAGE 4096u
#define PAGES 4u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int touch(const struct smb_packet *p, void *userdata)
{
	uint64_t *sum = userdata;

	/* read every byte handed out, so a bad range shows up under ASan */
	for (size_t i = 0; i < p->len; i++)
		*sum += p->data[i];
	*sum += p->sequence_id + p->previous_packet_dropped;
	return 0;
}

static void feed_patch(struct smb_reader *r, const uint8_t *p, size_t n)
{
	struct smb_patch patch = {};

	if (n < 16)
		return;
	memcpy(&patch.writer_id, p, 2);
	memcpy(&patch.chunk_id, p + 2, 4);
	memcpy(&patch.offset, p + 6, 4);
	memcpy(patch.data, p + 10, 4);
	patch.has_more = p[14] & 1;
	patch.target_buffer = p[15] & 1;
	(void)smb_reader_patch(r, &patch);
}

static void feed_shared(struct smb_reader *r, uint8_t *shm, const uint8_t *p, size_t n)
{
	memset(shm, 0, PAGE * PAGES);
	memcpy(shm, p, n < PAGE * PAGES ? n : PAGE * PAGES);
	for (uint32_t page = 0; page <= PAGES; page++)
		for (uint32_t chunk = 0; chunk <= SMB_MAX_CHUNKS_PER_PAGE; chunk++)
			(void)smb_reader_move(r, &(struct smb_chunk_move){
							 .page = page,
							 .chunk = chunk,
							 .target_buffer = chunk & 1,
						 });
}

static bool is_record_list(const uint8_t *data, size_t size)
{
	size_t off = 0;

	while (off < size) {
		uint16_t len;

		if (size - off < 3)
			return false;
		memcpy(&len, data + off + 1, 2);
		off += 3;
		if (len > size - off)
			return false;
		off += len;
	}
	return size > 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct smb_reader *r = NULL;
	uint8_t *shm = NULL;
	uint64_t sum = 0;
	size_t off = 0;

	shm = aligned_alloc(PAGE, PAGE * PAGES);
	if (!shm)
		return 0;
	if (smb_reader_new(shm, PAGE * PAGES, PAGE, 256 * 1024, &r) < 0) {
		free(shm);
		return 0;
	}
	(void)smb_reader_allow_buffer(r, 0);
	(void)smb_reader_allow_buffer(r, 1);

	if (!is_record_list(data, size)) {
		(void)smb_reader_move_bytes(r, 0, data, size);
	} else {
		while (off < size) {
			uint8_t kind = data[off];
			uint16_t len;
			const uint8_t *p;

			memcpy(&len, data + off + 1, 2);
			p = data + off + 3;
			off += 3 + (size_t)len;
			switch (kind % 4) {
			case 0:
				(void)smb_reader_move_bytes(r, (kind >> 2) & 1, p, len);
				break;
			case 1:
				feed_patch(r, p, len);
				break;
			case 2:
				(void)smb_reader_read_packets(r, false, touch, &sum);
				break;
			default:
				feed_shared(r, shm, p, len);
				break;
			}
		}
	}
	(void)smb_reader_read_packets(r, true, touch, &sum);
	r = smb_reader_free(r);
	free(shm);
	return sum == 0x5a5a5a5a5a5a5a5aull; /* keep the sum alive */
}
