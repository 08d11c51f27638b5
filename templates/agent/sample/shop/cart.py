from shop.prices import apply_discount


def total(items, discount=0):
    """The sum of the items' prices, each with the cart's discount."""
    return sum(apply_discount(item["price"], discount) for item in items)
