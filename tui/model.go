package tui

import (
	"context"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"

	"github.com/kmirror/kmirror/engine"
	"github.com/kmirror/kmirror/keymap"
	"github.com/kmirror/kmirror/themes"
	"github.com/kmirror/kmirror/views"
)

// Screen is one of the console's main views.
type Screen int8

const (
	ScreenMirrors Screen = iota
	ScreenTopics
	ScreenPartitions
	ScreenDetail
	ScreenEvents
	ScreenGroups
)

// tabOrder is the order tab cycles through. Detail is not a tab: it is
// reached with enter and left with esc, and tab from it moves on as if from
// the partitions table it belongs to.
var tabOrder = []Screen{ScreenMirrors, ScreenTopics, ScreenPartitions, ScreenEvents, ScreenGroups}

// topicsViewFrom is the partition count above which the console opens on
// the topics view: past a few dozen partitions a row per partition no
// longer fits a screen, and a row per topic does.
const topicsViewFrom = 48

// defaultScreen is the screen the console opens on for a snapshot of n
// partitions, until the operator picks one.
func defaultScreen(n int) Screen {
	if n > topicsViewFrom {
		return ScreenTopics
	}
	return ScreenPartitions
}

// String names the screen as the tab bar and the ":" commands spell it.
func (s Screen) String() string {
	switch s {
	case ScreenMirrors:
		return "mirrors"
	case ScreenTopics:
		return "topics"
	case ScreenPartitions:
		return "partitions"
	case ScreenDetail:
		return "detail"
	case ScreenEvents:
		return "events"
	case ScreenGroups:
		return "groups"
	}
	return "unknown"
}

func (s Screen) scope() keymap.Scope {
	switch s {
	case ScreenMirrors:
		return keymap.ScopeMirrors
	case ScreenTopics:
		return keymap.ScopeTopics
	case ScreenPartitions:
		return keymap.ScopePartitions
	case ScreenDetail:
		return keymap.ScopeDetail
	case ScreenEvents:
		return keymap.ScopeEvents
	case ScreenGroups:
		return keymap.ScopeGroups
	}
	return keymap.ScopePartitions
}

// Model is the root model. It owns the sizes, the theme, the snapshot and
// the overlays, and routes each message to the part that handles it; the
// screens themselves are views.Components.
type Model struct {
	ctrl   Controller
	opts   Options
	ctx    context.Context // ends the bridge goroutines when the console quits
	cancel context.CancelFunc

	km    keymap.KeyMap
	theme themes.Name
	// themeAuto: no --theme, so the terminal's background picks dark or
	// light; bgKnown once it has answered.
	themeAuto, bgKnown bool
	profile            colorprofile.Profile
	skin               *views.Skin

	width, height int
	body          Rect // the body size last handed to the screens
	tick          time.Duration
	ticking       bool // the poll loop is running
	snap          engine.Snapshot
	haveSnap      bool
	eventsClosed  bool

	header     *views.Header
	mirrors    *views.Mirrors
	topics     *views.Topics
	partitions *views.Partitions
	detail     *views.Detail
	events     *views.Events
	groups     *views.Groups

	// catchup keeps the recent samples the ETAs are estimated from; it
	// sees every snapshot once, before the views do.
	catchup *views.Catchup

	screen Screen
	// picked is set once the operator chose a screen; until then the
	// screen follows defaultScreen.
	picked  bool
	help    bool
	dialog  *confirmDialog
	cmdOpen bool
	cmdline views.Prompt
	status  status
	drill   *drillPanelState // nil without a drill
}

// status is the bottom line's message.
type status struct {
	text string
	err  bool
}

// NewModel returns the console model for c. Tests drive it with teatest or
// by calling Update directly; Run is the production entry point.
func NewModel(c Controller, opts Options) tea.Model {
	return newModel(context.Background(), c, opts)
}

func newModel(ctx context.Context, c Controller, opts Options) *Model {
	auto := opts.Theme == ""
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(ctx)
	theme, err := themes.ParseName(opts.Theme)
	m := &Model{
		ctrl:      c,
		opts:      opts,
		ctx:       ctx,
		cancel:    cancel,
		km:        keymap.New(opts.ReadOnly),
		theme:     theme,
		themeAuto: auto,
		profile:   colorprofile.TrueColor,
		tick:      opts.Tick,
		screen:    ScreenPartitions,
	}
	if err != nil {
		m.status = status{text: err.Error() + "; using dark", err: true}
	}
	m.skin = m.newSkin()
	m.header = views.NewHeader(m.skin)
	m.mirrors = views.NewMirrors(m.skin, m.km)
	m.topics = views.NewTopics(m.skin, m.km)
	m.catchup = views.NewCatchup()
	m.partitions = views.NewPartitions(m.skin, m.km)
	m.detail = views.NewDetail(m.skin, m.km)
	m.events = views.NewEvents(m.skin, m.km)
	m.groups = views.NewGroups(m.skin, m.km)
	if opts.Drill != nil {
		m.drill = newDrillPanel(opts.Drill)
	}
	return m
}

func (m *Model) palette() themes.Palette {
	if m.opts.NoColor {
		return themes.NoColor()
	}
	return themes.NewPalette(m.theme, m.profile)
}

func (m *Model) newSkin() *views.Skin {
	s := views.NewSkin(m.palette())
	if m.opts.ASCII {
		s.Styles = s.Styles.ASCII()
	}
	return s
}

// setProfile rebuilds the styles for the terminal's colour profile. Views
// share the Skin pointer, so replacing its contents restyles all of them.
func (m *Model) setProfile(p colorprofile.Profile) {
	m.profile = p
	*m.skin = *m.newSkin()
}

// onBackground picks dark or light from the terminal's background when no
// theme was asked for; an explicit --theme always wins.
func (m *Model) onBackground(bg tea.BackgroundColorMsg) {
	if !m.themeAuto {
		return
	}
	m.bgKnown = true
	m.theme = themes.Light
	if bg.IsDark() {
		m.theme = themes.Dark
	}
	*m.skin = *m.newSkin()
}

// Init starts the snapshot poll and the event wait, and asks the terminal
// for its background colour when the theme is to follow it.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.pollNow(), m.waitEvents()}
	if m.themeAuto {
		cmds = append(cmds, tea.RequestBackgroundColor)
	}
	return tea.Batch(cmds...)
}

// Update routes msg and notes when the operator moved to another screen.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	before := m.screen
	cmd := m.route(msg)
	if _, snap := msg.(snapshotMsg); !snap && m.screen != before {
		m.picked = true
	}
	return m, cmd
}

// route handles msg; every case is one call into the file that owns it.
func (m *Model) route(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.resize(msg.Width, msg.Height)
	case tea.ColorProfileMsg:
		m.setProfile(msg.Profile)
	case tea.BackgroundColorMsg:
		m.onBackground(msg)
	case snapshotMsg:
		m.refreshDrill()
		return m.onSnapshot(msg)
	case drillDoneMsg, drillTickMsg:
		return m.onDrill(msg)
	case eventsMsg:
		return m.onEvents(msg)
	case controlDoneMsg:
		return m.onControlDone(msg)
	case views.ActionMsg:
		return m.onAction(msg)
	case views.OpenDetailMsg:
		m.detail.Show(views.PartKey(msg))
		m.screen = ScreenDetail
	case views.ShowMirrorMsg:
		m.partitions.SetMirror(msg.Mirror)
		m.screen = ScreenPartitions
	case views.ShowTopicMsg:
		m.partitions.ShowTopic(msg.Mirror, msg.Topic)
		m.screen = ScreenPartitions
	case views.BackMsg:
		m.screen = ScreenPartitions
	case views.BackToTopicsMsg:
		m.screen = ScreenTopics
	case tea.PasteMsg:
		return m.onPaste(msg)
	case tea.MouseClickMsg, tea.MouseWheelMsg:
		return m.onMouse(msg.(tea.MouseMsg))
	case tea.KeyPressMsg:
		if cmd, ok := m.drillKey(msg); ok {
			return cmd
		}
		return m.onKey(msg)
	}
	return nil
}

// active returns the component of the current screen.
func (m *Model) active() views.Component {
	switch m.screen {
	case ScreenMirrors:
		return m.mirrors
	case ScreenTopics:
		return m.topics
	case ScreenPartitions:
		return m.partitions
	case ScreenDetail:
		return m.detail
	case ScreenEvents:
		return m.events
	case ScreenGroups:
		return m.groups
	}
	return m.partitions
}

func (m *Model) components() []views.Component {
	return []views.Component{m.mirrors, m.topics, m.partitions, m.detail, m.events, m.groups}
}

// resize records the terminal size and lays the screens out again.
func (m *Model) resize(w, h int) {
	m.width, m.height = w, h
	m.header.SetSize(w)
	m.relayout()
}

// layoutState is the layout input without an overlay.
func (m *Model) layoutState() LayoutState {
	st := LayoutState{HeaderH: m.header.Height()}
	m.drillLayout(&st)
	return st
}

// relayout hands the body size down to every screen, so switching screens
// never shows a stale size. It runs on resize and on every snapshot,
// because the header's height depends on the snapshot.
func (m *Model) relayout() {
	lay := ComputeLayout(m.width, m.height, m.layoutState())
	if lay.TooSmall {
		return
	}
	if lay.Body == m.body {
		return
	}
	m.body = lay.Body
	for _, c := range m.components() {
		c.SetSize(lay.Body.W, lay.Body.H)
	}
}

func (m *Model) setStatus(text string, isErr bool) { m.status = status{text: text, err: isErr} }

func (m *Model) quit() tea.Cmd {
	m.cancel()
	return tea.Quit
}
