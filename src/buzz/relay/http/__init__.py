"""The HTTP routes: the NIP-98 bridge, Blossom media, workflows, NIP-11 and the web
client, over the narrow `HttpHost` of the relay."""
