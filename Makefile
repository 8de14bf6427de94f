# herald: build, run, test, bench, install.
#   make run    install missing Debian packages, build, start on 127.0.0.1:8199
#   make test   install missing packages, build with ASan+UBSan, run every test
PKGS      := sqlite3 openssl libsystemd inih
CC        ?= cc
OPT       ?= -O2 -g
WARN      ?= -Wall -Wextra -Wshadow -Wstrict-prototypes -Wformat=2 -Wno-format-nonliteral
SANITIZE  ?=
BUILD     ?= build
PREFIX    ?= /usr/local
DESTDIR   ?=
VERSION   := 0.1.0

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
SAN_FLAGS  := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
ALL_CFLAGS := -std=gnu11 $(OPT) $(WARN) $(SAN_FLAGS) -D_GNU_SOURCE -DHERALD_VERSION='"$(VERSION)"' \
              $(PKG_CFLAGS) -MMD -MP $(CFLAGS)
ALL_LDFLAGS := $(SAN_FLAGS) $(LDFLAGS)

SRC      := $(wildcard src/*.c)
OBJ      := $(SRC:src/%.c=$(BUILD)/obj/%.o)
LIB_OBJ  := $(filter-out $(BUILD)/obj/main.o,$(OBJ))
HERALD   := $(BUILD)/herald

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)

LOAD_TOOLS := readers open-only overflow-report publish fanout-floor
LOAD_SRC   := $(filter-out load/proc.c,$(wildcard load/*.c))
LOAD_BIN   := $(filter $(addprefix load/,$(LOAD_TOOLS)),$(LOAD_SRC:.c=))

.PHONY: all deps run test unit bench fuzz install uninstall clean
all: $(HERALD) $(LOAD_BIN)

deps:
	@scripts/deps

# Rebuild everything when the flags change.
$(BUILD)/.flags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(ALL_CFLAGS) $(ALL_LDFLAGS)' | cmp -s - $@ || echo '$(ALL_CFLAGS) $(ALL_LDFLAGS)' > $@
FORCE:

$(BUILD)/obj/%.o: src/%.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(HERALD): $(OBJ)
	$(CC) $(ALL_LDFLAGS) -o $@ $(OBJ) $(PKG_LIBS)

$(BUILD)/tests/%: tests/unit/%.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -o $@ $< $(LIB_OBJ) $(ALL_LDFLAGS) $(PKG_LIBS)

$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/driver.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -o $@ $< tests/fuzz/driver.c $(LIB_OBJ) $(ALL_LDFLAGS) $(PKG_LIBS)

load/%: load/%.c load/proc.c load/proc.h $(BUILD)/.flags
	$(CC) $(ALL_CFLAGS) -o $@ $< load/proc.c $(ALL_LDFLAGS) -lsqlite3 -lssl -lcrypto -lm

unit: $(UNIT_BIN) $(FUZZ_BIN)

run: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p var
	$(HERALD) --config conf/herald.conf --db var/herald.db --listen 127.0.0.1:8199

# The suite runs against an ASan+UBSan build in its own folder.
test: deps
	@$(MAKE) --no-print-directory BUILD=build/asan SANITIZE=address,undefined OPT='-O1 -g' all unit
	@HERALD_BUILD=build/asan python3 tests/run.py

bench: deps
	@$(MAKE) --no-print-directory all
	@load/bench

fuzz: deps
	@$(MAKE) --no-print-directory BUILD=build/asan SANITIZE=address,undefined OPT='-O1 -g' unit
	@for f in $(FUZZ_SRC:tests/fuzz/%.c=build/asan/fuzz/%); do $$f --seconds 60 || exit 1; done

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/herald/load
	install -m 755 $(HERALD) $(DESTDIR)$(PREFIX)/bin/herald

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/herald
	rm -rf $(DESTDIR)$(PREFIX)/lib/herald

clean:
	rm -rf build $(LOAD_BIN)

-include $(OBJ:.o=.d)
