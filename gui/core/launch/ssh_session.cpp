// SPDX-License-Identifier: MIT
#include "ssh_session.h"

#include <cstdlib>
#include <cstring>
#include <optional>

namespace cppl::core {

namespace {

/// The session's options: ~/.ssh/config (or the given file) first, the profile's values over it.
std::string setOptions(ssh_session s, const RankCommand &first, const std::string &target, const LauncherSettings &settings)
{
    // Every option is checked: a value libssh refuses must not silently fall back to a default
    // (another user, another known_hosts file).
    auto option = [&](ssh_options_e what, const void *value, const char *name) -> std::string {
        if (ssh_options_set(s, what, value) != SSH_OK)
            return std::string("cannot set the SSH option ") + name + " for " + target + ": " + ssh_get_error(s);
        return {};
    };
    if (auto e = option(SSH_OPTIONS_HOST, target.c_str(), "host"); !e.empty())
        return e;
    if (ssh_options_parse_config(s, settings.sshConfigFile.empty() ? nullptr : settings.sshConfigFile.c_str()) != SSH_OK)
        return "cannot read the SSH configuration " + (settings.sshConfigFile.empty() ? std::string("~/.ssh/config") : settings.sshConfigFile)
               + " for " + target + ": " + ssh_get_error(s) + " (fix the file, or pass another with --ssh-config)";
    if (first.ssh.port != 22) {
        const unsigned int port = static_cast<unsigned int>(first.ssh.port);
        if (auto e = option(SSH_OPTIONS_PORT, &port, "port"); !e.empty())
            return e;
    }
    if (!first.ssh.user.empty())
        if (auto e = option(SSH_OPTIONS_USER, first.ssh.user.c_str(), "user"); !e.empty())
            return e;
    if (!settings.knownHostsFile.empty())
        if (auto e = option(SSH_OPTIONS_KNOWNHOSTS, settings.knownHostsFile.c_str(), "known_hosts file"); !e.empty())
            return e;
    const long timeout = settings.connectTimeoutSeconds;
    return option(SSH_OPTIONS_TIMEOUT, &timeout, "connect timeout");
}

/// "ssh-ed25519 SHA256:..." of the server's key, or "unknown".
std::string hostKeyFingerprint(ssh_session s)
{
    ssh_key key = nullptr;
    std::string fingerprint = "unknown";
    if (ssh_get_server_publickey(s, &key) == SSH_OK) {
        unsigned char *hash = nullptr;
        size_t len = 0;
        if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) == 0) {
            char *fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, len);
            fingerprint = std::string(ssh_key_type_to_char(ssh_key_type(key))) + " " + fp;
            ssh_string_free_char(fp);
            ssh_clean_pubkey_hash(&hash);
        }
        ssh_key_free(key);
    }
    return fingerprint;
}

/// A host known_hosts does not know: refused, or accepted (for this connection, or recorded)
/// as the settings or the user say; an error text or empty.
std::string acceptNewHostKey(ssh_session s, const std::string &where, const std::string &fingerprint, const LauncherSettings &settings,
                             std::string &note)
{
    HostKeyAnswer answer = HostKeyAnswer::Refuse;
    if (settings.newHostKeys == NewHostKeys::Ask && settings.askNewHostKey) {
        answer = settings.askNewHostKey(where, fingerprint);
        if (answer == HostKeyAnswer::Refuse)
            return "host " + where + " is not in known_hosts and its key " + fingerprint
                   + " was refused; nothing was started there (accept the key, or remove the host from the profile)";
    } else if (settings.newHostKeys == NewHostKeys::Accept) {
        answer = HostKeyAnswer::AcceptAlways;
    } else {
        return "host " + where + " is not in known_hosts; its key is " + fingerprint
               + ". Check that fingerprint with the host's administrator, then run again with --accept-new-host-keys "
                 "(or add it with ssh-keyscan)";
    }
    // Accepted once: trusted for this connection only, so nothing is written anywhere.
    if (answer == HostKeyAnswer::AcceptAlways && ssh_session_update_known_hosts(s) != SSH_OK)
        return "cannot record the host key of " + where + " in known_hosts: " + ssh_get_error(s);
    note = answer == HostKeyAnswer::AcceptAlways ? "accepted new host key for " + where + " and recorded it in known_hosts: " + fingerprint
                                                 : "accepted new host key for " + where + " for this run only (not recorded): " + fingerprint;
    return {};
}

/// The host key against known_hosts, as OpenSSH checks it; an error text or empty.
std::string checkHostKey(ssh_session s, const std::string &where, const LauncherSettings &settings, std::string &note)
{
    const std::string fingerprint = hostKeyFingerprint(s);
    switch (ssh_session_is_known_server(s)) {
    case SSH_KNOWN_HOSTS_OK:
        return {};
    case SSH_KNOWN_HOSTS_CHANGED:
        return "@@@ WARNING: THE HOST KEY OF " + where + " HAS CHANGED @@@ It now offers " + fingerprint
               + ", which differs from known_hosts. Someone could be intercepting the connection (man-in-the-middle), "
                 "or the host was reinstalled. Refusing to connect; if you trust the new key, remove the old one "
                 "(ssh-keygen -R) and run again.";
    case SSH_KNOWN_HOSTS_OTHER:
        return "host key of " + where + " is of another type than known_hosts records (now " + fingerprint
               + "); refusing to connect, as OpenSSH would (possible man-in-the-middle)";
    case SSH_KNOWN_HOSTS_NOT_FOUND:
    case SSH_KNOWN_HOSTS_UNKNOWN:
        return acceptNewHostKey(s, where, fingerprint, settings, note);
    case SSH_KNOWN_HOSTS_ERROR:
    default:
        return "cannot check the host key of " + where + " against known_hosts: " + ssh_get_error(s);
    }
}

std::string userOf(ssh_session s)
{
    char *user = nullptr;
    ssh_options_get(s, SSH_OPTIONS_USER, &user);
    const std::string u = user ? user : "?";
    ssh_string_free_char(user);
    return u;
}

/// ssh-agent, then the keys in ~/.ssh and IdentityFile (an encrypted one's passphrase asked
/// through @p callbacks, which libssh keeps for the session's life: the host thread owns them).
int authenticateWithDefaultKeys(ssh_session s, const LauncherSettings &settings, std::string &tried, ssh_callbacks_struct &callbacks)
{
    int rc = SSH_AUTH_DENIED;
    if (std::getenv("SSH_AUTH_SOCK")) {
        tried = "ssh-agent";
        rc = ssh_userauth_agent(s, nullptr);
    }
    if (rc == SSH_AUTH_SUCCESS)
        return rc;
    tried += std::string(tried.empty() ? "" : ", ") + "keys in ~/.ssh and IdentityFile";
    callbacks = {};
    callbacks.userdata = const_cast<LauncherSettings *>(&settings); // libssh's void *; only read
    callbacks.auth_function = [](const char *prompt, char *buf, size_t len, int, int, void *userdata) -> int {
        const auto *given = static_cast<const LauncherSettings *>(userdata);
        if (!given->passphrase || len == 0)
            return -1;
        const auto pass = given->passphrase(prompt ? prompt : "passphrase: ");
        if (!pass || pass->size() + 1 > len)
            return -1;
        std::memcpy(buf, pass->c_str(), pass->size() + 1);
        return 0;
    };
    ssh_callbacks_init(&callbacks);
    ssh_set_callbacks(s, &callbacks);
    return ssh_userauth_publickey_auto(s, nullptr, nullptr);
}

/// The profile's key, else ssh-agent, then the default keys in ~/.ssh; a password only where
/// the profile allows it, after the keys. An error text or empty.
std::string authenticate(ssh_session s, const RankCommand &first, const std::string &where, const LauncherSettings &settings,
                         ssh_callbacks_struct &callbacks)
{
    int rc = SSH_AUTH_DENIED;
    std::string tried;
    if (!first.ssh.identityFile.empty()) {
        tried = "key " + first.ssh.identityFile;
        ssh_key priv = nullptr;
        if (ssh_pki_import_privkey_file(first.ssh.identityFile.c_str(), nullptr, nullptr, nullptr, &priv) != SSH_OK) {
            // Perhaps encrypted: ask for its passphrase (the CLI reads it from the terminal).
            std::optional<std::string> pass;
            if (settings.passphrase)
                pass = settings.passphrase("passphrase for " + first.ssh.identityFile + " (" + where + "): ");
            if (!pass || ssh_pki_import_privkey_file(first.ssh.identityFile.c_str(), pass->c_str(), nullptr, nullptr, &priv) != SSH_OK)
                return "cannot read the private key " + first.ssh.identityFile + " for " + where
                       + " (missing, unreadable, or encrypted and no right passphrase given; or load it into ssh-agent)";
        }
        rc = ssh_userauth_publickey(s, nullptr, priv);
        ssh_key_free(priv);
    } else {
        rc = authenticateWithDefaultKeys(s, settings, tried, callbacks);
    }
    if (rc != SSH_AUTH_SUCCESS && first.ssh.passwordAuth && settings.passphrase) {
        tried += ", password";
        if (const auto pw = settings.passphrase("password for " + userOf(s) + "@" + where + ": "))
            rc = ssh_userauth_password(s, nullptr, pw->c_str());
    }
    if (rc != SSH_AUTH_SUCCESS)
        return "authentication to " + where + " as " + userOf(s) + " failed (tried " + tried + "): " + ssh_get_error(s);
    return {};
}

} // namespace

std::string openSshSession(const RankCommand &first, const LauncherSettings &settings, SshSession &session, ssh_callbacks_struct &callbacks,
                           std::string &note)
{
    const std::string target = first.ssh.alias.empty() ? first.address : first.ssh.alias;
    session.reset(ssh_new());
    ssh_session s = session.get();
    if (std::string e = setOptions(s, first, target, settings); !e.empty())
        return e;
    unsigned int port = 0;
    ssh_options_get_port(s, &port);
    const std::string where = target + " (port " + std::to_string(port) + ")";
    if (ssh_connect(s) != SSH_OK)
        return "cannot connect to " + where + ": " + ssh_get_error(s);
    if (std::string e = checkHostKey(s, where, settings, note); !e.empty())
        return e;
    return authenticate(s, first, where, settings, callbacks);
}

} // namespace cppl::core
