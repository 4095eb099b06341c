# tokenscope: X.bpf.c -> .output/X.bpf.o -> .output/X.skel.h -> user objects -> ./tokenscope
# Quiet by default; `make V=1` prints full commands.

OUTPUT := .output
CLANG ?= clang
BPFTOOL ?= bpftool
LLVM_OBJDUMP ?= llvm-objdump
CC ?= cc

# The BPF programs read registers and stack arguments by the x86-64 calling convention
# (PT_REGS_PARM6, stack_arg in bpf/cuda.bpf.c): other architectures are refused here, clearly,
# rather than built into probes that read the wrong registers.
MACHINE := $(shell uname -m)
ifeq ($(MACHINE),x86_64)
ARCH := x86
else
$(error tokenscope supports x86-64 only (this machine is $(MACHINE)): its BPF programs read \
	x86-64 registers and stack arguments, and vmlinux/ holds only x86/vmlinux.h)
endif

CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
CPPFLAGS += -I$(OUTPUT) -Ibpf -Iuser -MMD -MP
# libmicrohttpd (--metrics) is linked dynamically: its static form needs GnuTLS and p11-kit,
# which Debian ships without static archives; libnetfilter_conntrack (joins through NAT,
# user/capture/nat.c) too: Debian ships it without one.
LDLIBS_STATIC := -Wl,-Bstatic -lbpf -lelf -ljansson -lnghttp2 -lncurses -ltinfo -lcapstone -lz \
	-lstdc++ \
	-Wl,-Bdynamic -lmicrohttpd -lnetfilter_conntrack -lssl -lcrypto -lm
LDLIBS_UNIT := -ljansson -lnghttp2 -lz -lm
# DYNAMIC=1: every library linked dynamically, as a distribution package links (debian/rules):
# the system's copies, updated with it, and no embedded ones.
ifeq ($(DYNAMIC),1)
LDLIBS_LIVE := -lbpf -lelf -ljansson -lnghttp2 -lncurses -ltinfo -lcapstone -lz -lstdc++ \
	-lmicrohttpd -lnetfilter_conntrack -lssl -lcrypto -lm
else
LDLIBS_LIVE := $(LDLIBS_STATIC)
endif

BPF_SRCS := $(wildcard bpf/*.bpf.c)
# sock_core: the plaintext family built again with CO-RE reads in place of bpf_rdonly_cast,
# for kernels before 6.2 (Debian 12's 6.1); user/capture/live.c loads one or the other.
# X_legacy: every family built again with what Linux 5.10 has (TS_LEGACY, bpf/common.bpf.h),
# for kernels before 5.17 (no bpf_loop).
LEGACY := $(patsubst bpf/%.bpf.c,%_legacy,$(BPF_SRCS))
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.bpf.o,$(BPF_SRCS)) $(OUTPUT)/sock_core.bpf.o \
	$(patsubst %,$(OUTPUT)/%.bpf.o,$(LEGACY))
SKELS := $(patsubst %.bpf.o,%.skel.h,$(BPF_OBJS))

# user/ in layers, lowest first (docs/architecture.md; tests/check_layers.py checks the order):
# base proto llm engine stream sinks capture cli. Everything below capture is the pipeline:
# testable without root or BPF, linked into the unit tests and the fuzz targets.
LAYERS := base proto llm engine stream sinks capture cli
# exporter.c (--metrics) links libmicrohttpd, otlp_export.c (--otlp) OpenSSL: the binary only.
CORE_SRCS := $(filter-out user/sinks/exporter.c user/sinks/otlp_export.c,$(wildcard $(patsubst %,user/%/*.c,base proto llm engine stream sinks)))
# Live capture (probe families, ring buffer, attach, CUDA kernel names), the exporter, the CLI.
LIVE_SRCS := $(wildcard user/capture/*.c user/cli/*.c) user/sinks/exporter.c \
	user/sinks/otlp_export.c
CORE_OBJS := $(patsubst user/%.c,$(OUTPUT)/user/%.o,$(CORE_SRCS))
LIVE_OBJS := $(patsubst user/%.c,$(OUTPUT)/user/%.o,$(LIVE_SRCS))

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUTPUT)/tests/%,$(UNIT_SRCS))
UNIT_HELPERS := $(OUTPUT)/tests/helpers.o

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

.PHONY: all clean test check layers calls docs-check options man install install-check package-check deploy-check unit unit-bins unit-sanitized asan fuzz soak replay integration kernels \
	demo bench deps \
	go-binaries \
	fixtures gpu-testbed llama-server
.DELETE_ON_ERROR:
# Keep the BPF objects between the skeletons built from them.
.SECONDARY:

all: tokenscope

deps:
	$(Q)./scripts/setup.sh

$(OUTPUT) $(OUTPUT)/tests $(patsubst %,$(OUTPUT)/user/%,$(LAYERS)):
	$(Q)mkdir -p $@

# The CUDA probes hand out map slots with an atomic fetch-and-add, which needs BPF ISA v3
# (atomics with fetch: Linux 5.12).
$(OUTPUT)/cuda.bpf.o: BPF_CPU = -mcpu=v3
# The build's folder kept out of the objects' BTF (its line info names the sources): the same
# source builds the same binary and package wherever it is built (the package and its image
# in make test are then what the last build made, and podman's layer cache holds).
BPF_CFLAGS = -g -O2 -target bpf $(BPF_CPU) -D__TARGET_ARCH_$(ARCH) -Ibpf -Ivmlinux/$(ARCH) \
	-Wall -Wno-unused-function -ffile-prefix-map=$(CURDIR)=.
$(OUTPUT)/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) vmlinux/$(ARCH)/vmlinux.h | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@
$(OUTPUT)/sock_core.bpf.o: bpf/sock.bpf.c $(wildcard bpf/*.h) vmlinux/$(ARCH)/vmlinux.h | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -DTS_SOCK_CORE_READS -c $< -o $@
# A legacy object must not hold an atomic with fetch (5.12), which clang emits for any
# __sync_fetch_and_add whose value is used: checked here, not at load on a 5.10 kernel.
$(OUTPUT)/%_legacy.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) vmlinux/$(ARCH)/vmlinux.h | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -mcpu=v3 -DTS_LEGACY -DTS_SOCK_CORE_READS -c $< -o $@
	$(Q)if $(LLVM_OBJDUMP) -d $@ | grep -q 'atomic_fetch\|cmpxchg\|xchg'; then \
		echo "$@: an atomic with fetch, which Linux 5.10 has not" >&2; rm -f $@; exit 1; fi
$(OUTPUT)/%.skel.h: $(OUTPUT)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

$(OUTPUT)/user/%.o: user/%.c | $(patsubst %,$(OUTPUT)/user/%,$(LAYERS))
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# The skeletons are generated headers: objects that include them must wait for them.
$(LIVE_OBJS): $(SKELS)

tokenscope $(OUTPUT)/tokenscope: $(LIVE_OBJS) $(CORE_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS_LIVE) -o $@

$(OUTPUT)/tests/%.o: tests/unit/%.c | $(OUTPUT)/tests
	$(call msg,CC,$@)
	$(Q)$(CC) $(CPPFLAGS) -Itests/unit $(CFLAGS) -c $< -o $@

$(OUTPUT)/tests/test_%: $(OUTPUT)/tests/test_%.o $(UNIT_HELPERS) $(CORE_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ -lcmocka $(LDLIBS_UNIT) -o $@

# Live-side code that needs no BPF to test: CUDA kernel names (with libelf), the ring reader
# and its backlog, symbol lookup (elfsym).
$(OUTPUT)/tests/test_cuda_names: $(OUTPUT)/user/capture/cuda_names.o $(OUTPUT)/user/capture/elfsym.o \
	$(OUTPUT)/user/capture/procmaps.o
$(OUTPUT)/tests/test_cuda_names: LDLIBS_UNIT += -lelf -lstdc++
$(OUTPUT)/tests/test_ring: $(OUTPUT)/user/capture/ring.o
$(OUTPUT)/tests/test_backlog: $(OUTPUT)/user/capture/backlog.o $(OUTPUT)/user/capture/ring.o
$(OUTPUT)/tests/test_elfsym: $(OUTPUT)/user/capture/elfsym.o $(OUTPUT)/user/capture/procmaps.o \
	$(OUTPUT)/user/capture/ssl_inner.o
$(OUTPUT)/tests/test_elfsym: LDLIBS_UNIT += -lelf -lcapstone -ldl

# Go executables as user/capture/gobin.c reads them (functions, returns, version), against Go's
# own tools, on the Go TLS client built normally, PIE and stripped PIE (tests/go).
$(OUTPUT)/tests/gobin_dump: tests/go/gobin_dump.c $(OUTPUT)/user/capture/gobin.o | $(OUTPUT)/tests
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $^ -lelf -lcapstone -o $@

go-binaries: $(OUTPUT)/tests/gobin_dump fixtures
	$(Q)python3 tests/go/check_gobin.py $< tests/fixtures/.gen $(OUTPUT)/go-binaries
$(OUTPUT)/tests/test_util: $(OUTPUT)/user/capture/procmaps.o $(OUTPUT)/user/capture/tracefs.o \
	$(OUTPUT)/user/capture/llama_layout.o
$(OUTPUT)/tests/test_util: LDLIBS_UNIT += -lbpf -lelf -lz -lcapstone

fixtures:
	$(Q)$(MAKE) -s -C tests/fixtures

# The real llama-server, built once from the llama.cpp source the pinned node-llama-cpp
# (make deps) carries and cached in /var/cache/tokenscope/llama-server
# (scripts/llama_server.sh): about 12 minutes on 2 cores the first time.
llama-server:
	$(Q)./scripts/llama_server.sh >/dev/null

# The GPU test bed; its nvcc program needs the CUDA toolkit (/usr/local/cuda), not a GPU.
gpu-testbed:
	$(Q)$(MAKE) -s -C tests/gpu

# The layers' include order and the 800-line room (tests/check_layers.py), and that the check
# catches an upward include and a file too long.
layers:
	$(Q)python3 tests/check_layers.py
	$(Q)python3 tests/check_layers.py --self-test

# tokenscope(1), written by the binary from its option table (--man), linted: a warning fails.
man: tokenscope
	$(Q)./tokenscope --man >$(OUTPUT)/tokenscope.1
	$(Q)mandoc -T lint -W warning $(OUTPUT)/tokenscope.1
	@echo "man: .output/tokenscope.1 from the option table, mandoc -T lint clean"

# make install [PREFIX=/usr/local] [DESTDIR=]: the binary, its man page, the systemd unit
# (deploy/tokenscope.service, ExecStart at the installed binary).
PREFIX ?= /usr/local
install: man
	$(Q)install -D -m 0755 tokenscope $(DESTDIR)$(PREFIX)/bin/tokenscope
	$(Q)install -D -m 0644 $(OUTPUT)/tokenscope.1 $(DESTDIR)$(PREFIX)/share/man/man1/tokenscope.1
	$(Q)mkdir -p $(DESTDIR)$(PREFIX)/lib/systemd/system
	$(Q)sed 's|@BINDIR@|$(PREFIX)/bin|' deploy/tokenscope.service \
		>$(DESTDIR)$(PREFIX)/lib/systemd/system/tokenscope.service
	$(Q)chmod 0644 $(DESTDIR)$(PREFIX)/lib/systemd/system/tokenscope.service

# What make install wrote, checked in a scratch DESTDIR: every file where it belongs, the
# installed binary runs, its man page renders, and systemd-analyze verifies the unit (against
# the installed binary).
install-check: man
	$(Q)tests/check_install.sh

# deploy/ (the DaemonSet, its Dockerfile, the unit) against each other and the package; no
# cluster runs here to try the DaemonSet. The Prometheus rules through promtool's unit tests.
deploy-check:
	$(Q)/usr/bin/python3 tests/check_deploy.py
	$(Q)/usr/bin/python3 tests/check_deploy.py --self-test
	$(Q)tests/prometheus/run.sh

# The Debian package (debian/) built, linted, installed, run and removed (root).
package-check:
	$(Q)tests/check_package.sh

# The call structure drawn from the built objects (tests/check_calls.py): no call up a layer, no
# files calling each other round, and that the check catches both.
calls: tokenscope
	$(Q)python3 tests/check_calls.py $(OUTPUT)
	$(Q)python3 tests/check_calls.py $(OUTPUT) --self-test

# docs/architecture.md against the tree: every file under user/ and bpf/ named, no file named
# that is not there (tests/check_docs.py), and that the check catches both.
docs-check:
	$(Q)python3 tests/check_docs.py
	$(Q)python3 tests/check_docs.py --self-test

# README's option table against the options the binary accepts (its usage, built from the
# same table as its parser), and that the check catches a difference.
options: tokenscope
	$(Q)python3 tests/check_options.py ./tokenscope README.md
	$(Q)python3 tests/check_options.py ./tokenscope README.md --self-test

# One binary and one case: make unit T=test_h2 CASE=test_goaway (CASE takes * and ?).
UNIT_RUN := $(if $(T),$(OUTPUT)/tests/$(T),$(UNIT_BINS))
unit: $(UNIT_RUN)
	$(Q)TS_UNIT_CASE='$(CASE)' ./tests/unit/run.sh $(UNIT_RUN)

# The unit tests built, not run: `make test` builds them two at a time first.
unit-bins: $(UNIT_BINS)

# Recorded captures (a real H200 run among them) replayed and checked; no root needed.
# TOKENSCOPE=./tokenscope-asan runs them through the sanitized build.
replay: tokenscope
	$(Q)./tests/replay/run.sh

# One phase: make integration PHASE=h2 (run.py names them; tls is the core TLS checks).
integration: tokenscope fixtures gpu-testbed llama-server
	$(Q)./tests/integration/run.sh $(if $(PHASE),--only $(PHASE))

# The kernel matrix: Debian's 5.10, 6.1 and 6.12 booted under QEMU, every probe family's
# traffic traced in each, against this host's records (tests/kernels; docs/kernels.md).
kernels: tokenscope fixtures gpu-testbed
	$(Q)./tests/kernels/run.sh

# The small door: no root, no network, once `make deps` has installed what it needs.
check: layers docs-check calls options unit replay
	$(Q)$(MAKE) -s -j2 $(FUZZ_BINS)
	$(Q)$(MAKE) -s fuzz FUZZ_SECONDS=2

# README promise: on a fresh Debian 12 machine this installs what is missing and passes every test.
test: deps
	$(Q)$(MAKE) -s layers docs-check deploy-check
	$(Q)$(MAKE) -s -j2 all unit-bins
	$(Q)$(MAKE) -s unit options calls install-check
	$(Q)$(MAKE) -s go-binaries
	$(Q)$(MAKE) -s package-check
	$(Q)$(MAKE) -s unit-sanitized
	$(Q)$(MAKE) -s replay
	$(Q)$(MAKE) -s integration
	$(Q)$(MAKE) -s kernels
	$(Q)$(MAKE) -s asan
	$(Q)TOKENSCOPE=./tokenscope-asan REPLAY_HTML_AS=./tokenscope ./tests/replay/run.sh
	$(Q)TOKENSCOPE=./tokenscope-asan ./tests/integration/run.sh --only plaintext
	$(Q)$(MAKE) -s -j2 $(FUZZ_BINS)
	$(Q)$(MAKE) -s fuzz FUZZ_SECONDS=5

# libFuzzer targets (tests/fuzz) over the parsers, the decoder, the whole pipeline and the
# recording reader, with ASan and UBSan. `make fuzz` runs each FUZZ_SECONDS; `make test` a few.
FUZZ_TARGETS := http sse decode pipeline recording json h2 zmtp
FUZZ_SECONDS ?= 60
FUZZ_BINS := $(patsubst %,$(OUTPUT)/fuzz/fuzz_%,$(FUZZ_TARGETS))

FUZZ_FLAGS := -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all
# the core compiled once for every target (instrumented for the fuzzer, not linked with its
# main), and each target linked from it: eight whole-core compiles took 200 s of make test
FUZZ_CORE_OBJS := $(patsubst user/%.c,$(OUTPUT)/fuzz/core/%.o,$(CORE_SRCS))

$(OUTPUT)/fuzz:
	$(Q)mkdir -p $@

$(OUTPUT)/fuzz/core/%.o: user/%.c
	$(call msg,FUZZCC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -Ibpf -Iuser -MMD -MP -c $< -o $@

$(OUTPUT)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_CORE_OBJS) | $(OUTPUT)/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(FUZZ_FLAGS) -fsanitize=fuzzer -Ibpf -Iuser -Itests/fuzz $< $(FUZZ_CORE_OBJS) \
		-ljansson -lnghttp2 -lz -lm -o $@

fuzz: $(FUZZ_BINS)
	$(Q)./tests/fuzz/run.sh $(FUZZ_SECONDS)

# Sustained load (not in `make test`): SOAK_STREAMS concurrent streams for SOAK_SECONDS.
SOAK_SECONDS ?= 600
SOAK_STREAMS ?= 1000
soak: deps
	$(Q)$(MAKE) -s all fixtures
	$(Q)python3 tests/soak/soak.py --seconds $(SOAK_SECONDS) --streams $(SOAK_STREAMS)

SAN_CFLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=all

# The unit tests (and the Go executables' reader) again under AddressSanitizer and
# UndefinedBehaviorSanitizer.
unit-sanitized:
	$(Q)$(MAKE) -s -j2 OUTPUT=$(OUTPUT)/san CFLAGS="$(SAN_CFLAGS)" unit-bins
	$(Q)$(MAKE) -s OUTPUT=$(OUTPUT)/san CFLAGS="$(SAN_CFLAGS)" unit go-binaries

# The tracer itself under both sanitizers, beside the release build: ./tokenscope-asan (its
# objects in $(OUTPUT)/san). `make test` replays every recording and runs the plaintext
# integration tests with it.
asan:
	$(Q)$(MAKE) -s -j2 OUTPUT=$(OUTPUT)/san CFLAGS="$(SAN_CFLAGS)" $(OUTPUT)/san/tokenscope
	$(Q)cp $(OUTPUT)/san/tokenscope tokenscope-asan

# `make demo TOP=1`: the vLLM-shaped service under waves of load, in `tokenscope top`.
demo: deps
	$(Q)$(MAKE) -s all fixtures
	$(Q)$(MAKE) -s -C tests/gpu ../../.output/gpu/libcuda.so.1
	$(Q)if [ "$(TOP)" = 1 ]; then ./demo/top.sh; else ./demo/run.sh; fi

bench: deps
	$(Q)./scripts/setup.sh bench
	$(Q)$(MAKE) -s all fixtures gpu-testbed llama-server $(OUTPUT)/sslbench $(OUTPUT)/gpubench \
		$(OUTPUT)/sockbench $(OUTPUT)/llamabench $(OUTPUT)/gotlsbench $(OUTPUT)/topbench
	$(Q)./bench/run.sh

$(OUTPUT)/bare.bpf.o $(OUTPUT)/floor.bpf.o: $(OUTPUT)/%.bpf.o: bench/%.bpf.c \
		vmlinux/$(ARCH)/vmlinux.h | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Ivmlinux/$(ARCH) -c $< -o $@

CUDA_LIB ?= /usr/local/cuda/lib64
$(OUTPUT)/gpubench: bench/gpubench.c gpu-testbed
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $< -L$(CUDA_LIB) -lcudart -L$(OUTPUT)/gpu -lcuda \
		-Wl,-rpath,$(CUDA_LIB) -Wl,-rpath,$(abspath $(OUTPUT)/gpu) -o $@

# One refresh of `tokenscope top` with 10 000 requests in its window (bench/topbench.c).
$(OUTPUT)/topbench: bench/topbench.c $(CORE_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $^ $(LDLIBS_UNIT) -o $@

$(OUTPUT)/libllamastub.so: bench/llamastub.c | $(OUTPUT)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -fPIC -shared $< -o $@

$(OUTPUT)/llamabench: bench/llamabench.c $(OUTPUT)/libllamastub.so
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $< -L$(OUTPUT) -lllamastub -Wl,-rpath,$(abspath $(OUTPUT)) -o $@

SSLBENCH_OBJS := $(patsubst %,$(OUTPUT)/user/capture/%.o,gobin elfsym ssl_inner)
$(OUTPUT)/sslbench: bench/sslbench.c $(OUTPUT)/bare.skel.h $(SSLBENCH_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $< $(SSLBENCH_OBJS) -lssl -lcrypto \
		$(LDLIBS_STATIC) -o $@

# The Go TLS workload (bench/gotls.go), built as the Go fixtures are (tests/fixtures/Makefile).
$(OUTPUT)/gotlsbench: bench/gotls.go | $(OUTPUT)
	$(call msg,GO,$@)
	$(Q)env GO111MODULE=off CGO_ENABLED=0 GOCACHE=$(abspath $(OUTPUT))/go-cache GOFLAGS= \
		go build -trimpath -o $@ $<

$(OUTPUT)/sockbench: bench/sockbench.c user/capture/tracefs.c $(OUTPUT)/bare.skel.h \
		$(OUTPUT)/floor.skel.h
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) bench/sockbench.c user/capture/tracefs.c $(LDLIBS_STATIC) -o $@

clean:
	$(call msg,CLEAN,$(OUTPUT) tokenscope)
	$(Q)rm -rf $(OUTPUT) tokenscope tokenscope-asan
	$(Q)$(MAKE) -s -C tests/fixtures clean
	$(Q)$(MAKE) -s -C tests/gpu clean

-include $(wildcard $(OUTPUT)/user/*/*.d $(OUTPUT)/tests/*.d $(OUTPUT)/fuzz/core/*/*.d)
