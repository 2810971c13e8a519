/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: arbitrary bytes as an IPC byte stream through the frame
 * deserializer (length headers, partial reads, bounded IPCFrame decoding),
 * then every decoded frame re-encoded.  The first input byte (also part of
 * the stream) picks the size of the simulated reads, so that read boundaries
 * land everywhere while valid streams stay valid seeds.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ipc/ipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void touch(const Perfetto__Protos__IPCFrame *f)
{
	uint8_t *buf = NULL;
	size_t len;

	/* A decoded frame must pack again (or be refused as too large, never crash). */
	if (ipc_frame_encode(f, &buf, &len) == 0)
		free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ipc_frame_decoder *d = NULL;
	size_t step, off = 0;

	if (size == 0 || ipc_frame_decoder_new(&d) < 0)
		return 0;

	step = data[0] ? data[0] : size;
	while (off < size) {
		Perfetto__Protos__IPCFrame *f = NULL;
		size_t want = size - off < step ? size - off : step;
		int n, r;

		n = ipc_frame_decoder_feed(d, data + off, want, -1);
		if (n < 0)
			break;
		off += (size_t)n;
		while ((r = ipc_frame_decoder_next(d, &f, NULL)) > 0) {
			touch(f);
			f = ipc_frame_free(f);
		}
		if (r < 0 || n == 0)
			break;
	}

	ipc_frame_decoder_free(d);
	return 0;
}
