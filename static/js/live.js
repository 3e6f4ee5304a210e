/* The monitoring websocket's messages, made whole: the first is a "snapshot" of every host;
 * later ones ("changes") carry only the hosts and keys that changed. hiveLive.merge(message)
 * returns the full entries of the hosts it names, and the ids of hosts gone. */
(function () {
  "use strict";
  const known = new Map(); // host id -> its full latest entry
  window.hiveLive = {
    merge(message) {
      if (message.type === "snapshot") known.clear();
      const hosts = message.hosts.map((host) => {
        const full = Object.assign({}, known.get(host.id), host);
        known.set(host.id, full);
        return full;
      });
      const removed = message.removed || [];
      removed.forEach((id) => known.delete(id));
      return { hosts, removed };
    },
  };
})();
