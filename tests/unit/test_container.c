// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A cgroup path's container and pod (base/container.c), in each runtime's naming: containerd,
 * CRI-O, Docker and Podman under systemd, the cgroupfs driver's kubepods tree and Docker's,
 * a guaranteed pod (no QoS in its slice), and paths that name neither (a host service, a
 * user session, ids of the wrong length or case).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include "base/container.h"

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ID2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define UID "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9"
#define UID_ "1f2e3d4c_5b6a_4978_8695_a4b3c2d1e0f9"

static void test_layouts(void **state)
{
	static const struct {
		const char *path, *id, *runtime, *pod;
	} cases[] = {
		{ "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
		  ".slice/cri-containerd-" ID ".scope", ID, "containerd", UID },
		{ "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
		  ".slice/crio-" ID ".scope", ID, "cri-o", UID },
		{ "/kubepods.slice/kubepods-pod" UID_ ".slice/cri-containerd-" ID ".scope", ID,
		  "containerd", UID },
		{ "/kubepods/burstable/pod" UID "/" ID, ID, "cgroupfs", UID },
		{ "/kubepods/pod" UID "/" ID, ID, "cgroupfs", UID },
		{ "/system.slice/docker-" ID ".scope", ID, "docker", "" },
		{ "/docker/" ID, ID, "cgroupfs", "" },
		{ "/machine.slice/libpod-" ID ".scope/container", ID, "podman", "" },
		/* podman on cgroupfs, alone and in a pod (seen live: tests/integration) */
		{ "/libpod_parent/libpod-" ID, ID, "podman", "" },
		{ "/libpod_parent/" ID2 "/libpod-" ID, ID, "podman", "" },
		/* containerd's ctr on cgroupfs: its default namespace, the id it was given */
		{ "/default/tokenscope-sse.1", "tokenscope-sse.1", "containerd", "" },
		/* the pod's own slice (its sandbox's processes, or a process of the pod itself) */
		{ "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice", "",
		  NULL, UID },
	};
	static const char *const none[] = {
		"/", "/system.slice/nginx.service", "/user.slice/user-0.slice/session-3.scope",
		"/system.slice/docker-0123.scope", /* too short */
		"/libpod_parent/" ID2, /* a podman pod's own cgroup: no container, no uid */
		"/default/-x", "/default/a/b", "/other/" "name",
		"/system.slice/docker-0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef.scope",
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podnot-a-uid.slice",
		"",
	};
	struct container_ids ids;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_true(container__from_cgroup(cases[i].path, &ids));
		assert_string_equal(ids.container_id, cases[i].id);
		assert_string_equal(ids.pod_uid, cases[i].pod);
		if (cases[i].runtime)
			assert_string_equal(ids.runtime, cases[i].runtime);
		else
			assert_null(ids.runtime);
	}
	/* in a podman pod: the container's, and that it is in a pod (its name: HOSTNAME) */
	container__from_cgroup("/libpod_parent/" ID2 "/libpod-" ID, &ids);
	assert_true(ids.podman_pod);
	container__from_cgroup("/libpod_parent/libpod-" ID, &ids);
	assert_false(ids.podman_pod);
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		assert_false(container__from_cgroup(none[i], &ids));
		assert_string_equal(ids.container_id, "");
		assert_string_equal(ids.pod_uid, "");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layouts),
	};

	return cmocka_run_group_tests_name("container", tests, NULL, NULL);
}
