"""``kaid webhook``: kai's admission webhook (``admission``: what it allows and changes; ``certs``: its certificates;
``server``: HTTPS, certificate rotation and the webhook configurations' ``caBundle``)."""
