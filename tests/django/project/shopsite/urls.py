from django.urls import path

from shop import views

urlpatterns = [path("orders/<int:order_id>/receipt", views.receipt)]
