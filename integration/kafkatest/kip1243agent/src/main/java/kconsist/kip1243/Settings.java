package kconsist.kip1243;

/**
 * The agent's configuration, set once in premain. Kept apart from Kip1243
 * so that premain loads no Kafka class before the hooks are installed.
 */
final class Settings {
    static volatile Config cfg = new Config();
    /** Set when a hook failed to install: every hook then does nothing. */
    static volatile boolean off;

    private Settings() {}
}
