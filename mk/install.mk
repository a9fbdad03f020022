# install.mk - manual pages (build/man/, generated from docs/man/*.in and each program's own
# option table) and make install / make uninstall; included by mk/build.mk.
#
#   make install PREFIX=/usr/local DESTDIR=   (every *DIR below may be set on its own)
# Daemons go to sbin (started by the service manager or an administrator), the tools people run
# to bin; bqos-nbd-node is a symlink to bqos-node (the program picks the block node by argv[0]).
PREFIX     ?= /usr/local
DESTDIR    ?=
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
MANDIR     ?= $(PREFIX)/share/man
DOCDIR     ?= $(PREFIX)/share/doc/bqos
UNITDIR    ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR ?= /etc

INSTALL_SBIN  := bqos-controller bqos-node
INSTALL_LINKS := bqos-nbd-node:bqos-node
INSTALL_BIN   := bqos-ctl bqos-load bqos-mcload bqos-nbd-load bqos-sim bqos-pshift
INSTALL_DOCS  := README.md LICENSE docs/operations.md docs/security.md
EXAMPLES      := $(filter-out %.in,$(wildcard examples/systemd/*))
# Monitoring: the alert rules with their unit tests, the Grafana dashboard (docs/operations.md, Alerts).
EXAMPLES_PROM := examples/prometheus/bqos-alerts.yml examples/prometheus/bqos-alerts.test.yml
EXAMPLES_GRAF := examples/grafana/bqos-dashboard.json
UNITS_IN      := $(wildcard examples/systemd/*.service.in)
UNITS         := $(patsubst examples/systemd/%.in,$(O)/systemd/%,$(UNITS_IN))
MAN_IN        := $(wildcard docs/man/*.in)
MANS          := $(patsubst docs/man/%.in,$(O)/man/%,$(MAN_IN))
BQOS_VERSION  := $(shell sed -n 's/^\#define BQOS_VERSION "\(.*\)"/\1/p' common/version.h)

man: $(MANS)
units: $(UNITS)

# A page docs/man/PROG.S.in gets PROG's option table: its program must be built first.
define man_rule
# The pages name the configuration's directory: rebuilt when the directories change, like the units.
$(O)/man/$(1): docs/man/$(1).in mk/manpage.sh $(BIN)/$(basename $(1)) $(O)/dirs
	@mkdir -p $$(dir $$@)
	SYSCONFDIR='$(SYSCONFDIR)' SBINDIR='$(SBINDIR)' mk/manpage.sh $(BIN)/$(basename $(1)) $$< $(BQOS_VERSION) > $$@.tmp && mv $$@.tmp $$@
endef
$(foreach m,$(notdir $(MANS)),$(eval $(call man_rule,$(m))))

# Units name the installed programs and configuration: rebuilt when the directories change.
$(O)/systemd/%: examples/systemd/%.in $(O)/dirs
	@mkdir -p $(dir $@)
	sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' $< > $@
$(shell mkdir -p $(O); echo '$(SBINDIR) $(SYSCONFDIR)' | cmp -s - $(O)/dirs || echo '$(SBINDIR) $(SYSCONFDIR)' > $(O)/dirs)
# A rule of its own (nothing to do): make may have listed $(O) before the line above wrote the file
# (a wildcard over */*/module.mk reads it), and would then find no rule for the units at all.
$(O)/dirs: ;

install: all
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR)/examples/prometheus \
		$(DESTDIR)$(DOCDIR)/examples/grafana
	install -m 0755 $(addprefix $(BIN)/,$(INSTALL_SBIN)) $(DESTDIR)$(SBINDIR)
	$(foreach l,$(INSTALL_LINKS),ln -sfn $(word 2,$(subst :, ,$(l))) $(DESTDIR)$(SBINDIR)/$(word 1,$(subst :, ,$(l)));)
	install -m 0755 $(addprefix $(BIN)/,$(INSTALL_BIN)) $(DESTDIR)$(BINDIR)
	install -m 0644 $(filter %.1,$(MANS)) $(DESTDIR)$(MANDIR)/man1
	install -m 0644 $(filter %.8,$(MANS)) $(DESTDIR)$(MANDIR)/man8
	install -m 0644 $(UNITS) $(DESTDIR)$(UNITDIR)
	install -m 0644 $(INSTALL_DOCS) $(DESTDIR)$(DOCDIR)
	install -m 0644 $(EXAMPLES) $(DESTDIR)$(DOCDIR)/examples
	install -m 0644 $(EXAMPLES_PROM) $(DESTDIR)$(DOCDIR)/examples/prometheus
	install -m 0644 $(EXAMPLES_GRAF) $(DESTDIR)$(DOCDIR)/examples/grafana

uninstall:
	rm -f $(addprefix $(DESTDIR)$(SBINDIR)/,$(INSTALL_SBIN) $(foreach l,$(INSTALL_LINKS),$(word 1,$(subst :, ,$(l))))) \
		$(addprefix $(DESTDIR)$(BINDIR)/,$(INSTALL_BIN)) \
		$(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(filter %.1,$(MAN_IN:.in=)))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(filter %.8,$(MAN_IN:.in=)))) \
		$(addprefix $(DESTDIR)$(UNITDIR)/,$(notdir $(UNITS))) \
		$(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(INSTALL_DOCS))) \
		$(addprefix $(DESTDIR)$(DOCDIR)/examples/,$(notdir $(EXAMPLES))) \
		$(addprefix $(DESTDIR)$(DOCDIR)/examples/prometheus/,$(notdir $(EXAMPLES_PROM))) \
		$(addprefix $(DESTDIR)$(DOCDIR)/examples/grafana/,$(notdir $(EXAMPLES_GRAF)))
	rmdir $(DESTDIR)$(DOCDIR)/examples/prometheus $(DESTDIR)$(DOCDIR)/examples/grafana \
		$(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR) 2>/dev/null || true
