# SPDX-License-Identifier: BSD-2-Clause
# herald: build, run, test, bench, fuzz, install.
#   make run    install missing Debian packages, build, start on 127.0.0.1:8199
#   make check  the quick loop: build with ASan+UBSan, run the unit tests and
#               replay the fuzz corpora (no packages installed, no sudo)
#   make test   install missing packages, build with ASan+UBSan, run every test
#   make bench-peer  install nginx and nchan if missing, build, measure herald
#               beside them (load/bench-peer)
#   make fuzz   install clang too, fuzz every target with libFuzzer for
#               FUZZ_SECONDS (60) each, one after another; exit 1 on a crash
#   make deb    the Debian packages herald and herald-tools in build/deb-out
# The libraries, as pkg-config name=Debian package (scripts/deps installs them).
PKG_DEBIAN := sqlite3=libsqlite3-dev openssl=libssl-dev libsystemd=libsystemd-dev inih=libinih-dev \
              hiredis=libhiredis-dev libnghttp2=libnghttp2-dev \
              liburing=liburing-dev libcurl=libcurl4-openssl-dev
PKGS      := $(foreach m,$(PKG_DEBIAN),$(firstword $(subst =, ,$(m))))
CC        ?= cc
OPT       ?= -O2 -g
WARN      ?= -Wall -Wextra -Wshadow -Wstrict-prototypes -Wformat=2 -Wno-format-nonliteral
SANITIZE  ?=
BUILD     ?= build
PREFIX    ?= /usr/local
DESTDIR   ?=
SYSCONFDIR  ?= /etc
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
MANDIR      ?= $(PREFIX)/share/man
SHAREDIR    ?= $(PREFIX)/share/herald
TOOLDIR     ?= $(PREFIX)/lib/herald/load
VERSION   := 0.1.0
# make run and make test compile on every core (the rest as make is called).
NPROC     := $(shell nproc 2>/dev/null || echo 1)

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
SAN_FLAGS  := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
ALL_CFLAGS := -std=gnu11 $(OPT) $(WARN) $(SAN_FLAGS) -D_GNU_SOURCE -DHERALD_VERSION='"$(VERSION)"' \
              $(PKG_CFLAGS) -MMD -MP $(CFLAGS)
ALL_LDFLAGS := $(SAN_FLAGS) $(LDFLAGS)

AR        ?= ar
SRC      := $(wildcard src/*/*.c)
OBJ      := $(SRC:src/%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/console_page.o $(BUILD)/obj/store_redis_function.o
LIB_OBJ  := $(filter-out $(BUILD)/obj/server/main.o,$(OBJ))
HERALD   := $(BUILD)/herald

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
LF_BIN   := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/bin/%)

# make fuzz: clang from Debian, its own build folder, a time per target.
FUZZ_CC      ?= clang-14
FUZZ_BUILD   ?= build/libfuzzer
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= $(FUZZ_SRC:tests/fuzz/fuzz_%.c=%)

# The load tools: $(BUILD)/load/NAME, each made of load/NAME.c and its
# parts load/NAME-*.c, linked with the tools' library. load/NAME in the
# tree is a link to load/tool-launch.sh, which runs the built one.
LOAD_TOOLS := readers open-only overflow-report publish fanout-floor backlog-experiment topics rate minimal-sse \
              tls-handshakes presence
# The tools that are scripts (they run the C tools beside them), and the
# module they share to find herald.
LOAD_SCRIPTS := bench bench-adversary bench-auth bench-catchup bench-check bench-h2c bench-tokens bench-redis bench-workers \
                bench-peer \
                bench-mercure plot
LOAD_BIN   := $(LOAD_TOOLS:%=$(BUILD)/load/%)
# The tools' library: what the tools share (load/tool*.c: options, JSON,
# /proc, finding herald, certificates; load/sse-client*.c: the SSE client)
# and herald's own util, procstat and sockdiag objects.
LOAD_LIB     := $(BUILD)/load/libtool.a
LOAD_LIB_OBJ := $(patsubst load/%.c,$(BUILD)/load/obj/%.o,$(wildcard load/tool*.c load/sse-client*.c)) \
                $(foreach m,util procstat sockdiag,$(BUILD)/obj/common/$(m).o)
LOAD_LIBS    := -lsqlite3 -lssl -lcrypto -lm -luring -lnghttp2

.PHONY: all deps pkg-check browser-deps run test check unit bench bench-check bench-peer fuzz fuzz-targets format \
	install uninstall deb version clean
all: $(HERALD) $(LOAD_BIN)

deps:
	@scripts/deps

# Stop before compiling when a library's pkg-config file is missing: the
# build would go on without any library's flags (pkg-config prints nothing
# when one of several is missing) and fail at the link with undefined
# references that name no package. The flag stamps depend on it, so only
# what compiles checks (not clean), and make run and make test check in
# their inner make, after scripts/deps installed what was missing.
pkg-check:
	@command -v pkg-config >/dev/null || \
		{ echo 'pkg-config is not installed (Debian: pkg-config); scripts/deps installs it' >&2; exit 1; }
	@missing=; for m in $(PKG_DEBIAN); do \
		pkg-config --exists "$${m%%=*}" || missing="$${missing:+$$missing, }$${m%%=*} (Debian: $${m#*=})"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "missing pkg-config package(s): $$missing; scripts/deps (or apt-get install) installs them" >&2; \
		exit 1; \
	fi

# Rebuild everything when the flags change.
$(BUILD)/.flags: FORCE pkg-check
	@mkdir -p $(BUILD)
	@echo '$(ALL_CFLAGS) $(ALL_LDFLAGS)' | cmp -s - $@ || echo '$(ALL_CFLAGS) $(ALL_LDFLAGS)' > $@
FORCE:

$(BUILD)/obj/%.o: src/%.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -c $< -o $@

# The console page (src/api/console.html) becomes a C string in the build
# folder, console_page[] and console_page_len, so herald reads no file to
# serve it: od writes each byte as three octal digits and awk makes every
# 16 of them one string literal of octal escapes (no quoting to get wrong,
# whatever the page holds).
$(BUILD)/gen/console_page.c: src/api/console.html Makefile
	@mkdir -p $(dir $@)
	@{ printf '/* Generated from %s by the Makefile: do not edit. */\n#include "api/console.h"\n\n' '$<'; \
	  printf 'const char console_page[] =\n'; \
	  od -An -v -to1 '$<' | awk '{ s = ""; for (i = 1; i <= NF; i++) s = s "\\" $$i; print "\t\"" s "\"" }'; \
	  printf '\t"";\nconst size_t console_page_len = sizeof(console_page) - 1;\n'; } > $@.tmp && mv $@.tmp $@

# The same for the Redis function library (src/store/store_redis.lua), loaded
# into Redis at every connect and printed by herald --redis-function.
$(BUILD)/gen/store_redis_function.c: src/store/store_redis.lua Makefile
	@mkdir -p $(dir $@)
	@{ printf '/* Generated from %s by the Makefile: do not edit. */\n#include "store/store_redis.h"\n\n' '$<'; \
	  printf 'const char store_redis_function[] =\n'; \
	  od -An -v -to1 '$<' | awk '{ s = ""; for (i = 1; i <= NF; i++) s = s "\\" $$i; print "\t\"" s "\"" }'; \
	  printf '\t"";\n'; } > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/store_redis_function.o: $(BUILD)/gen/store_redis_function.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -c $< -o $@

$(BUILD)/obj/console_page.o: $(BUILD)/gen/console_page.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -c $< -o $@

$(HERALD): $(OBJ)
	$(CC) $(ALL_LDFLAGS) -o $@ $(OBJ) $(PKG_LIBS)

# A unit test is compiled once and only linked again when herald changes.
$(BUILD)/obj/unit/%.o: tests/unit/%.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -c $< -o $@

$(BUILD)/tests/%: $(BUILD)/obj/unit/%.o $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# A fuzz target is its body alone (tests/fuzz/fuzz.h); the wrapper it
# shares with every other, tests/fuzz/fuzz.c, and the standalone driver,
# tests/fuzz/driver.c, are compiled once and linked into each.
FUZZ_WRAP := $(BUILD)/obj/fuzz/fuzz.o
# Kept between runs, though only programs name them.
.SECONDARY: $(UNIT_SRC:tests/unit/%.c=$(BUILD)/obj/unit/%.o) $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/obj/fuzz/%.o) \
	$(BUILD)/obj/fuzz/driver.o $(FUZZ_WRAP) $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/obj/libfuzzer/%.o)
$(BUILD)/obj/fuzz/%.o: tests/fuzz/%.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -c $< -o $@

$(BUILD)/fuzz/%: $(BUILD)/obj/fuzz/%.o $(BUILD)/obj/fuzz/driver.o $(FUZZ_WRAP) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The same targets as libFuzzer programs (make fuzz builds them with clang
# and SANITIZE=fuzzer-no-link,...; libFuzzer brings main(), the wrapper
# LLVMFuzzerTestOneInput). HERALD_LIBFUZZER tells a target which it runs in.
$(BUILD)/obj/libfuzzer/%.o: tests/fuzz/%.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DHERALD_LIBFUZZER -Isrc -c $< -o $@

$(BUILD)/bin/%: $(BUILD)/obj/libfuzzer/%.o $(FUZZ_WRAP) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(PKG_LIBS)

fuzz-targets: $(LF_BIN)

# The tools of a build start the herald of that build (HERALD_TREE_BIN)
# while it exists, so an installed copy still finds one; when that one is
# sanitized (make test, make check) they take the release build of the tree
# (HERALD_RELEASE_BIN, the default BUILD's) if there is one, so a benchmark
# measures herald. Each build has its own tools and library, so the
# sanitized and the release tools never overwrite each other; a stamp of
# these names rebuilds them when the tree moves.
LOAD_DEFS := -DHERALD_TREE_BIN='"$(abspath $(HERALD))"' -DHERALD_RELEASE_BIN='"$(abspath build/herald)"'
$(BUILD)/load/.flags: FORCE
	@mkdir -p $(dir $@)
	@echo '$(LOAD_DEFS)' | cmp -s - $@ || echo '$(LOAD_DEFS)' > $@

# Every file of load/ is compiled once per build, with its own -MMD file.
$(BUILD)/load/obj/%.o: load/%.c $(BUILD)/.flags $(BUILD)/load/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LOAD_DEFS) -Isrc -c $< -o $@

$(LOAD_LIB): $(LOAD_LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# A tool's parts, for the tool's stem $*: a variable, so that the static
# pattern below does not read the pattern's % as its own.
load_parts = $(patsubst load/%.c,$(BUILD)/load/obj/%.o,$(wildcard load/$*-*.c))
.SECONDEXPANSION:
$(LOAD_BIN): $(BUILD)/load/%: $(BUILD)/load/obj/%.o $$(load_parts) $(LOAD_LIB)
	$(CC) $(ALL_LDFLAGS) -o $@ $(filter %.o,$^) $(LOAD_LIB) $(LOAD_LIBS)

unit: $(UNIT_BIN) $(FUZZ_BIN)

# The quick loop for a change: the folders of src/ checked for a circle
# and for a .c file over 1,200 lines (scripts/layers), the unit tests and the fuzz corpora replayed
# (without the second of mutations make test adds), two at a time
# (scripts/check), on the ASan+UBSan build in build/asan that make test
# uses. Nothing is installed, no server started, nothing run but the shell
# and coreutils; make test stays the whole suite. The last line says PASS
# or FAIL, and make's exit status follows it.
CHECK_BUILD := build/asan
check:
	@scripts/layers
	@$(MAKE) --no-print-directory BUILD=$(CHECK_BUILD) SANITIZE=address,undefined OPT='-O1 -g' unit
	@scripts/check $(CHECK_BUILD)

# The how-to is printed once herald says it is ready (never when it fails to
# start, e.g. on a busy port); herald's log passes through a filter that
# ignores Ctrl-C, so herald's last lines still show, and herald's exit
# status is make's.
RUN_HOWTO := printf '%s\n' \
	'herald: serving http://127.0.0.1:8199 with the database var/herald.db (Ctrl-C stops it)' \
	'  read:     curl -N http://127.0.0.1:8199/api/events/stream' \
	'  publish:  curl -H '"'"'Content-Type: application/json'"'"' -d '"'"'{"type":"greeting","topic":"news","data":"hello","public":true}'"'"' http://127.0.0.1:8199/api/events' \
	'  or:       sqlite3 var/herald.db "INSERT INTO events(type,topic,data,public) VALUES('"'"'greeting'"'"','"'"'news'"'"','"'"'hi'"'"',1)"' \
	'  health:   curl http://127.0.0.1:8199/api/health'

run: deps
	@$(MAKE) -j$(NPROC) --no-print-directory all
	@status=$$( { { $(HERALD) 2>&1 3>&-; echo $$? >&3; } | { trap '' INT; \
		while IFS= read -r line; do \
			printf '%s\n' "$$line" >&2; \
			case $$line in *'herald ready:'*) $(RUN_HOWTO) >&2 ;; esac; \
		done; }; } 3>&1 ); exit $$status

# playwright-core for the browser tests, installed from the committed lock
# into tests/browser/node_modules; again only when the lock has changed.
BROWSER_DEPS := tests/browser/node_modules/.package-lock.json
browser-deps: $(BROWSER_DEPS)
$(BROWSER_DEPS): tests/browser/package.json tests/browser/package-lock.json
	npm ci --prefix tests/browser --ignore-scripts --no-audit --no-fund
	@touch $@

# The suite runs against an ASan+UBSan build in its own folder.
test: deps browser-deps
	@$(MAKE) -j$(NPROC) --no-print-directory BUILD=build/asan SANITIZE=address,undefined OPT='-O1 -g' all unit
	@HERALD_BUILD=build/asan python3 tests/run.py

# The tables of docs/BENCHMARKS.md, the guard against regressions, then one
# hostile client's cost to everyone else (load/bench-adversary: exit 1 when
# an attack holds the loop over 10 ms or more memory than the limits allow).
bench: deps
	@$(MAKE) --no-print-directory all
	@HERALD_BUILD=$(BUILD) load/bench
	@HERALD_BUILD=$(BUILD) load/bench-check
	@HERALD_BUILD=$(BUILD) load/bench-adversary

# The guard against regressions alone: the steady figures against
# docs/bench/baseline.json (load/bench-check --update writes it anew).
bench-check: deps
	@$(MAKE) --no-print-directory all
	@HERALD_BUILD=$(BUILD) load/bench-check

# herald beside nginx + nchan (one worker), with the same client and the
# kernel's floors, in one run (load/bench-peer --help); the bench set of
# scripts/deps brings nginx and the module.
bench-peer:
	@scripts/deps bench
	@$(MAKE) --no-print-directory all
	@HERALD_BUILD=$(BUILD) load/bench-peer

# Coverage-guided fuzzing: each target in turn for FUZZ_SECONDS (or until
# FUZZ_RUNS executions, when given), with its corpus and dictionary; new
# inputs and crashes stay under FUZZ_BUILD.
fuzz:
	@scripts/deps fuzz
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) SANITIZE=fuzzer-no-link,address,undefined \
		OPT='-O1 -g' fuzz-targets
	@FUZZ_RUNS='$(FUZZ_RUNS)' tests/fuzz/libfuzzer.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# install: the binary, the load tools (the scripts too, with the tree they
# came from written into tool_herald.py, as the C tools carry theirs),
# /etc/herald/herald.conf (never over
# an existing one; mode 0640, group herald or else root, since it may hold
# tokens; a DESTDIR install by a user keeps the user's group), the units
# (herald.service and .socket, and the template herald@.service for several
# nodes on one Redis) with PREFIX filled in, the sysusers.d entry for user herald, herald(8),
# and examples in SHAREDIR. Installing to the real root (no DESTDIR) also
# creates the user and reloads systemd.
CONF_FOR_SERVICE := sed -e 's|^db = .*|db = /var/lib/herald/herald.db|' conf/herald.conf

# Format every C file with the repository's .clang-format.
format:
	clang-format -i src/*/*.[ch] load/*.[ch] tests/unit/*.[ch] tests/fuzz/*.[ch]

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(TOOLDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
		$(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(SHAREDIR) $(DESTDIR)$(SYSCONFDIR)/herald
	install -m 755 $(HERALD) $(DESTDIR)$(PREFIX)/bin/herald
	install -m 755 $(LOAD_BIN) $(DESTDIR)$(TOOLDIR)/
	install -m 755 $(addprefix load/,$(LOAD_SCRIPTS)) $(DESTDIR)$(TOOLDIR)/
	sed -e "s|^TREE = None .*|TREE = '$(CURDIR)'|" load/tool_herald.py > $(DESTDIR)$(TOOLDIR)/tool_herald.py
	chmod 644 $(DESTDIR)$(TOOLDIR)/tool_herald.py
	sed -e 's|/usr/local/bin/herald|$(PREFIX)/bin/herald|g' -e 's|/etc/herald/|$(SYSCONFDIR)/herald/|g' \
		systemd/herald.service > $(DESTDIR)$(UNITDIR)/herald.service
	chmod 644 $(DESTDIR)$(UNITDIR)/herald.service
	sed -e 's|/usr/local/bin/herald|$(PREFIX)/bin/herald|g' -e 's|/etc/herald/|$(SYSCONFDIR)/herald/|g' \
		systemd/herald@.service > $(DESTDIR)$(UNITDIR)/herald@.service
	chmod 644 $(DESTDIR)$(UNITDIR)/herald@.service
	install -m 644 systemd/herald.socket $(DESTDIR)$(UNITDIR)/herald.socket
	install -m 644 systemd/herald.sysusers $(DESTDIR)$(SYSUSERSDIR)/herald.conf
	sed -e 's|/usr/local/|$(PREFIX)/|g' -e 's|/etc/herald/|$(SYSCONFDIR)/herald/|g' docs/herald.8 \
		> $(DESTDIR)$(MANDIR)/man8/herald.8
	chmod 644 $(DESTDIR)$(MANDIR)/man8/herald.8
	install -m 644 systemd/herald-unix.conf conf/Caddyfile conf/Caddyfile.cluster conf/sysctl.d/60-herald.conf \
		$(DESTDIR)$(SHAREDIR)/
	@if [ -z "$(DESTDIR)" ] && command -v systemd-sysusers >/dev/null; then \
		systemd-sysusers $(SYSUSERSDIR)/herald.conf; \
	fi; true
	@conf=$(DESTDIR)$(SYSCONFDIR)/herald/herald.conf; \
	if [ -e $$conf ]; then \
		echo "keeping the existing $$conf"; \
	else \
		echo "installing $$conf"; \
		group=root; if getent group herald >/dev/null; then group=herald; fi; \
		(umask 077 && $(CONF_FOR_SERVICE) > $$conf.new) && chmod 640 $$conf.new && \
		{ chgrp $$group $$conf.new 2>/dev/null || [ -n "$(DESTDIR)" ]; } && mv $$conf.new $$conf; \
	fi
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi; true

# uninstall: everything install put down, except a herald.conf that was
# edited since (the database in /var/lib/herald and user herald stay too).
uninstall:
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		systemctl disable --now herald.service herald.socket 2>/dev/null; true; \
	fi
	rm -f $(DESTDIR)$(PREFIX)/bin/herald
	rm -rf $(DESTDIR)$(TOOLDIR)
	rmdir $(DESTDIR)$(PREFIX)/lib/herald 2>/dev/null || true
	rm -f $(DESTDIR)$(UNITDIR)/herald.service $(DESTDIR)$(UNITDIR)/herald.socket $(DESTDIR)$(UNITDIR)/herald@.service
	rm -f $(DESTDIR)$(SYSUSERSDIR)/herald.conf $(DESTDIR)$(MANDIR)/man8/herald.8
	rm -rf $(DESTDIR)$(SHAREDIR)
	@conf=$(DESTDIR)$(SYSCONFDIR)/herald/herald.conf; \
	if [ -e $$conf ] && ! $(CONF_FOR_SERVICE) | cmp -s - $$conf; then \
		echo "keeping $$conf: it was edited after installation"; \
	else \
		rm -f $$conf; rmdir $(DESTDIR)$(SYSCONFDIR)/herald 2>/dev/null; true; \
	fi
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi; true

# deb: the Debian packages herald_$(VERSION)_ARCH.deb and herald-tools_...
# in DEB_OUT, by dpkg-buildpackage from debian/. It builds in a copy of the
# tree (the files git tracks, as they are now; every file but build/ outside
# a git checkout) under DEB_OUT, since dpkg-buildpackage writes into the
# tree it builds and its packages beside it. debian/rules checks that
# debian/changelog names this VERSION.
DEB_OUT ?= build/deb-out
DEB_SRC := $(DEB_OUT)/herald-$(VERSION)
deb:
	@scripts/deps
	rm -rf $(DEB_SRC) && mkdir -p $(DEB_SRC)
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		git ls-files -z | tar --null -T - -cf - | tar -xf - -C $(DEB_SRC); \
	else \
		tar --exclude=./build -cf - . | tar -xf - -C $(DEB_SRC); \
	fi
	cd $(DEB_SRC) && dpkg-buildpackage -b -us -uc -Jauto
	@ls -1 $(DEB_OUT)/*_$(VERSION)_*.deb

# The version, for scripts and debian/rules.
version:
	@echo $(VERSION)

clean:
	rm -rf build

-include $(OBJ:.o=.d) $(wildcard $(BUILD)/obj/unit/*.d $(BUILD)/obj/fuzz/*.d $(BUILD)/obj/libfuzzer/*.d $(BUILD)/load/obj/*.d)
