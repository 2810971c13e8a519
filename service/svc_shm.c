/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The producer's shared memory buffer: sized like traced does it and created
 * as a sealed memfd, so the producer can neither shrink it under us (SIGBUS
 * on our side) nor grow it.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "service/svc_internal.h"
#include "util/util.h"

void svc_shm_valid_sizes(size_t shm_size, size_t page_size, size_t *ret_shm, size_t *ret_page)
{
	size_t pages;
	bool ok;

	if (page_size == 0)
		page_size = SVC_DEFAULT_SHM_PAGE;
	if (shm_size == 0)
		shm_size = SVC_DEFAULT_SHM_SIZE;
	/* Pages above 32 KiB pass the ABI but would not fit traced's buffer
	 * records, so traced clamps them; so do we. */
	page_size = MIN(page_size, (size_t)SVC_MAX_SHM_PAGE);
	shm_size = MIN(shm_size, (size_t)SVC_MAX_SHM_SIZE);

	pages = page_size / 4096;
	ok = page_size >= 4096 && page_size % 4096 == 0 && (pages & (pages - 1)) == 0 &&
	     shm_size >= page_size && shm_size % page_size == 0;
	if (!ok) {
		shm_size = SVC_DEFAULT_SHM_SIZE;
		page_size = SVC_DEFAULT_SHM_PAGE;
	}
	*ret_shm = shm_size;
	*ret_page = page_size;
}

int svc_shm_create(size_t size, int *ret_fd, void **ret_base)
{
	_cleanup_close_ int fd = -EBADF;
	void *base;

	fd = memfd_create("perfetto_shmem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0)
		return -errno;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return -errno;
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		return -errno;
	*ret_fd = TAKE_FD(fd);
	*ret_base = base;
	return 0;
}
